"""API keys and the access they grant: made, stored as a hash only, checked, revoked."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tether import Access, InvalidArgument, NotFound, Tether
from tether.access import KEY_PREFIX, key_hash
from tether.models import GLOBAL_WORKSPACE


def test_a_key_is_shown_once_and_stored_as_a_hash_only(tmp_path: Path) -> None:
    with Tether(db=tmp_path / "t.db") as t:
        key, secret = t.keys.create(workspaces=["acme"], name="drafting agent")
        assert secret.startswith(KEY_PREFIX) and len(secret) > 40
        assert t.keys.authenticate(secret) == key
        assert [k.id for k in t.keys.list()] == [key.id]
    raw = (tmp_path / "t.db").read_bytes()
    assert secret.encode() not in raw
    with sqlite3.connect(tmp_path / "t.db") as conn:
        (stored,) = conn.execute("SELECT key_hash FROM api_keys").fetchone()
    assert stored == key_hash(secret)


@pytest.mark.parametrize(
    "secret", ["", "tether_", "tether_nope", "Bearer x", "tether_\ud800", "x" * 10_000]
)
def test_anything_but_a_live_secret_authenticates_nobody(tether: Tether, secret: str) -> None:
    tether.keys.create(workspaces=["acme"])
    assert tether.keys.authenticate(secret) is None


def test_a_revoked_key_authenticates_nobody_and_revoking_twice_keeps_the_first_time(
    tether: Tether,
) -> None:
    key, secret = tether.keys.create(workspaces=["acme"])
    first = tether.keys.revoke(key.id)
    assert first.revoked_at is not None and not first.active
    assert tether.keys.authenticate(secret) is None
    assert tether.keys.revoke(key.id).revoked_at == first.revoked_at
    assert not tether.keys.any_active()
    with pytest.raises(NotFound, match="no API key with id 'key_missing'"):
        tether.keys.revoke("key_missing")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"workspaces": [GLOBAL_WORKSPACE]}, "use global_write"),
        ({"workspaces": ["a"], "read_only": True, "global_write": True}, "read-only key"),
        ({"workspaces": [" "]}, "must not be empty"),
        ({"workspaces": ["a\x00b"]}, "cannot be stored"),
    ],
)
def test_keys_that_make_no_sense_are_refused(
    tether: Tether, options: dict[str, object], message: str
) -> None:
    with pytest.raises(InvalidArgument, match=message):
        tether.keys.create(**options)  # type: ignore[arg-type]
    assert tether.keys.list() == []


def test_what_each_kind_of_key_may_read_and_write(tether: Tether) -> None:
    bound, _ = tether.keys.create(workspaces=["a", "b"])
    global_writer, _ = tether.keys.create(workspaces=["a"], global_write=True)
    reader, _ = tether.keys.create(workspaces=["a"], read_only=True)
    admin, _ = tether.keys.create(admin=True)
    cases = {
        "bound": (Access(bound), {"a", "b", GLOBAL_WORKSPACE}, {"a", "b"}),
        "global writer": (Access(global_writer), {"a", GLOBAL_WORKSPACE}, {"a", GLOBAL_WORKSPACE}),
        "read only": (Access(reader), {"a", GLOBAL_WORKSPACE}, set()),
    }
    for name, (access, reads, writes) in cases.items():
        for workspace in ("a", "b", "c", GLOBAL_WORKSPACE):
            assert access.can_read(workspace) == (workspace in reads), (name, workspace)
            assert access.can_write(workspace) == (workspace in writes), (name, workspace)
        assert not access.admin
    for access in (Access(admin), Access()):
        assert access.admin and access.readable is None
        assert access.can_read("anything") and access.can_write("anything")
    assert Access(bound).default_workspace() == GLOBAL_WORKSPACE  # two workspaces: no guess
    assert Access(reader).default_workspace() == "a"
    assert not Access(reader).may_write and Access(bound).may_write


def test_the_audit_log_reads_per_workspace_in_sql(tether: Tether) -> None:
    tether.create_session("chat", workspace_id="acme")
    tether.add(text="The valve seat is checked weekly.", workspace_id="acme", session_id="chat")
    tether.add(text="The valve seat of the other plant.", workspace_id="other")
    tether.add(text="The global valve guide.")
    ids = {
        "session": tether.retrieve("valve seat", scope="session", session_id="chat").retrieval_id,
        "acme": tether.retrieve("valve seat", scope="workspace", workspace_id="acme").retrieval_id,
        "other": tether.retrieve("valve", scope="workspace", workspace_id="other").retrieval_id,
        "global": tether.retrieve("valve guide", scope="global").retrieval_id,
    }

    def read(workspaces: list[str] | None) -> set[str]:
        return {e.retrieval_id for e in tether.retrieval_log(workspace_ids=workspaces)}

    assert read(["acme"]) == {ids["session"], ids["acme"]}
    assert read(["acme", GLOBAL_WORKSPACE]) == {ids["session"], ids["acme"], ids["global"]}
    assert read([]) == set()
    assert read(None) == set(ids.values())
    [one] = tether.retrieval_log(retrieval_id=ids["other"])
    assert one.scope == {"kind": "workspace", "id": "other"}


def test_a_keys_last_use_is_recorded_at_most_once_a_minute(tether: Tether) -> None:
    key, secret = tether.keys.create(workspaces=["acme"])
    assert key.last_used_at is None
    assert tether.keys.mark_used(tether.keys.authenticate(secret)) is True
    used = tether.keys.authenticate(secret)
    assert used is not None and used.last_used_at is not None
    assert tether.keys.mark_used(used) is False  # within the minute: no write
    assert tether.keys.mark_used(used, every=0.0) is True


def test_a_use_is_due_only_when_the_last_one_is_old(tether: Tether) -> None:
    key, secret = tether.keys.create(workspaces=["acme"])
    assert tether.keys.use_is_due(key)
    tether.keys.mark_used(key)
    used = tether.keys.authenticate(secret)
    assert used is not None and not tether.keys.use_is_due(used)
    assert tether.keys.use_is_due(used, every=0.0)
