"""Who may see what through the service: API keys bound to workspaces, and the access a
key grants.

A key is a random secret (``tether_`` and 43 URL-safe characters) shown once, when it is
made; the store keeps its SHA-256 only (a secret of 256 random bits needs no slow hash:
there is nothing to guess from the digest). A key

- reads its workspaces and the global library (``GLOBAL``);
- writes its workspaces, and the global library only with ``global_write``; nothing at
  all when ``read_only``;
- with ``admin``, reads and writes everything and manages keys.

The shells (``tether serve``, ``tether mcp``) check a request against :class:`Access`
before any SQL runs; the scope predicate in SQL stays the inner wall.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from tether.errors import InvalidArgument
from tether.models import GLOBAL_WORKSPACE
from tether.store import ApiKey, ApiKeys, utcnow
from tether.text import check_identifier

KEY_PREFIX = "tether_"

#: The API key a shell is answering for, while it answers: retrievals started meanwhile
#: record it in their audit row (``asked_by``), which decides who may read the row.
_ASKER: ContextVar[str | None] = ContextVar("tether_asker", default=None)


@contextmanager
def asked_by(key_id: str | None) -> Iterator[None]:
    """Retrievals started inside (on this thread or task, and threads and tasks started
    from it) are audited as asked by the API key ``key_id``; the shells wrap each
    request in it. ``None``: the library's own caller."""
    token = _ASKER.set(key_id)
    try:
        yield
    finally:
        _ASKER.reset(token)


def current_asker() -> str | None:
    """The API key whose request is being answered here, if any."""
    return _ASKER.get()


def key_hash(secret: str) -> str:
    """The stored form of a key's secret."""
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class Access:
    """What one caller may read and write. ``key`` None is the local operator (a service
    run without keys, on loopback only): everything, like an admin key."""

    key: ApiKey | None = None

    @property
    def admin(self) -> bool:
        return self.key is None or self.key.admin

    @property
    def readable(self) -> tuple[str, ...] | None:
        """The workspaces this caller reads (None: all of them)."""
        if self.admin:
            return None
        assert self.key is not None
        return (*self.key.workspaces, GLOBAL_WORKSPACE)

    def can_read(self, workspace_id: str) -> bool:
        readable = self.readable
        return readable is None or workspace_id in readable

    def can_write(self, workspace_id: str) -> bool:
        if self.admin:
            return True
        assert self.key is not None
        if self.key.read_only:
            return False
        if workspace_id == GLOBAL_WORKSPACE:
            return self.key.global_write
        return workspace_id in self.key.workspaces

    @property
    def may_write(self) -> bool:
        """Whether this caller may write anywhere at all."""
        if self.admin:
            return True
        assert self.key is not None
        return not self.key.read_only and bool(self.key.workspaces or self.key.global_write)

    def default_workspace(self) -> str:
        """Where a write goes when the caller names no workspace: the key's only
        workspace, else the global library."""
        if self.key is not None and len(self.key.workspaces) == 1:
            return self.key.workspaces[0]
        return GLOBAL_WORKSPACE


class KeyRing:
    """The service's API keys in ``store``: made, listed, revoked and checked."""

    def __init__(self, store: ApiKeys) -> None:
        self.store = store

    def __repr__(self) -> str:
        return f"KeyRing({self.store!r})"

    def create(
        self,
        *,
        workspaces: tuple[str, ...] | list[str] = (),
        global_write: bool = False,
        read_only: bool = False,
        admin: bool = False,
        name: str | None = None,
    ) -> tuple[ApiKey, str]:
        """A new key and its secret. The secret is returned once and never stored."""
        bound = tuple(dict.fromkeys(workspaces))
        for workspace_id in bound:
            check_identifier("workspace id", workspace_id)
            if not workspace_id.strip():
                raise InvalidArgument("a key's workspace id must not be empty")
        if GLOBAL_WORKSPACE in bound:
            raise InvalidArgument(
                f"every key reads {GLOBAL_WORKSPACE!r}; use global_write to let it change it"
            )
        if read_only and global_write:
            raise InvalidArgument("a read-only key cannot also have global write")
        if name is not None:
            check_identifier("key name", name)
        key = ApiKey(
            id=f"key_{secrets.token_hex(6)}",
            name=name,
            workspaces=bound,
            global_write=global_write,
            read_only=read_only,
            admin=admin,
            created_at=utcnow(),
        )
        secret = KEY_PREFIX + secrets.token_urlsafe(32)
        self.store.insert_api_key(key, key_hash(secret))
        return key, secret

    def list(self) -> list[ApiKey]:
        return self.store.api_keys()

    def revoke(self, key_id: str) -> ApiKey:
        check_identifier("key id", key_id)
        return self.store.revoke_api_key(key_id)

    def any_active(self) -> bool:
        return any(key.active for key in self.store.api_keys())

    @staticmethod
    def use_is_due(key: ApiKey, *, every: float = 60.0) -> bool:
        """Whether ``key``'s last use is older than ``every`` seconds (or unrecorded): a
        caller checks this before queueing the write, so a read waits on no writer."""
        return key.last_used_at is None or _seconds_between(key.last_used_at, utcnow()) >= every

    def mark_used(self, key: ApiKey, *, every: float = 60.0) -> bool:
        """Record that ``key`` was used now, at most once per ``every`` seconds (its
        ``last_used_at`` is minutes-accurate, not a write per request). Whether it wrote (a
        full or read-only store records nothing, and raises nothing)."""
        if not self.use_is_due(key, every=every):
            return False
        return self.store.touch_api_key(key.id, utcnow())

    def authenticate(self, secret: str) -> ApiKey | None:
        """The active key whose secret this is, or None."""
        if not isinstance(secret, str) or not secret.startswith(KEY_PREFIX):
            return None
        key = self.store.api_key_by_hash(key_hash(secret))
        return key if key is not None and key.active else None


def _seconds_between(earlier: str, later: str) -> float:
    from datetime import datetime

    def parse(stamp: str) -> datetime:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00"))

    return (parse(later) - parse(earlier)).total_seconds()
