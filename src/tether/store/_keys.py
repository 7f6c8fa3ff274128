"""Service API keys: stored by the hash of their secret, looked up by it, listed, revoked."""

from __future__ import annotations

import json
import logging
from typing import Any

from tether.errors import NotFound, StorageFull, StorageReadOnly
from tether.store._common import StorePart
from tether.store.records import ApiKey, utcnow

_COLUMNS = (
    "id, name, workspaces, global_write, read_only, admin, created_at, revoked_at, last_used_at"
)

log = logging.getLogger(__name__)


def _key(row: Any) -> ApiKey:
    id_, name, workspaces, global_write, read_only, admin, created, revoked, used = row
    return ApiKey(
        id=id_,
        name=name,
        workspaces=tuple(json.loads(workspaces)),
        global_write=bool(global_write),
        read_only=bool(read_only),
        admin=bool(admin),
        created_at=created,
        revoked_at=revoked,
        last_used_at=used,
    )


class KeysMixin(StorePart):
    def insert_api_key(self, key: ApiKey, key_hash: str) -> None:
        with self.db.write() as conn:
            conn.execute(
                f"INSERT INTO api_keys ({_COLUMNS}, key_hash)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    key.id,
                    key.name,
                    json.dumps(list(key.workspaces)),
                    int(key.global_write),
                    int(key.read_only),
                    int(key.admin),
                    key.created_at,
                    key.revoked_at,
                    key.last_used_at,
                    key_hash,
                ),
            )

    def api_key_by_hash(self, key_hash: str) -> ApiKey | None:
        row = self._select_one(f"SELECT {_COLUMNS} FROM api_keys WHERE key_hash = ?", (key_hash,))
        return None if row is None else _key(row)

    def api_keys(self) -> list[ApiKey]:
        return [
            _key(r)
            for r in self._select(f"SELECT {_COLUMNS} FROM api_keys ORDER BY created_at, id")
        ]

    def revoke_api_key(self, key_id: str) -> ApiKey:
        with self.db.write() as conn:
            conn.execute(
                "UPDATE api_keys SET revoked_at = coalesce(revoked_at, ?) WHERE id = ?",
                (utcnow(), key_id),
            )
            row = conn.execute(
                f"SELECT {_COLUMNS} FROM api_keys WHERE id = ?", (key_id,)
            ).fetchone()
        if row is None:
            raise NotFound(f"no API key with id {key_id!r}")
        return _key(row)

    def touch_api_key(self, key_id: str, at: str) -> bool:
        """Record a key's last use, as far as the store can: a full or read-only store
        still serves the requests the key makes, so not recording it is no failure."""
        try:
            with self.db.write() as conn:
                conn.execute("UPDATE api_keys SET last_used_at = ? WHERE id = ?", (at, key_id))
        except (StorageFull, StorageReadOnly) as exc:
            log.debug("the last use of API key %s was not recorded: %s", key_id, exc)
            return False
        return True
