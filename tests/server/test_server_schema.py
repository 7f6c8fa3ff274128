"""The HTTP API against its own OpenAPI schema, by schemathesis over real HTTP on
loopback: generated requests (valid and invalid) never get a 5xx, and every response
matches the schema (status codes, content types, bodies, headers)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from schemathesis.checks import positive_data_acceptance
from schemathesis.specs.openapi.checks import ensure_resource_availability, use_after_free

from helpers import make_settings
from tether import Tether
from tether.server import create_app


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory, serve_app: Any) -> Iterator[tuple[str, str]]:
    db: Path = tmp_path_factory.mktemp("schema") / "t.db"
    with Tether(db=db, settings=make_settings()) as t:
        t.create_session("chat", workspace_id="acme")
        t.add(text="The valve seat is replaced every 500 hours.", title="Pump",
              workspace_id="acme", session_id="chat", document_id="pump")  # fmt: skip
        t.add(text="Every valve is checked with a torque wrench.", title="Guide")
        _, secret = t.keys.create(admin=True)
        with serve_app(create_app(t, warm=False, mcp=False)) as url:
            yield url, secret


@pytest.fixture(scope="module")
def api_schema(api: tuple[str, str]) -> Any:
    url, _ = api
    return schemathesis.openapi.from_url(f"{url}/openapi.json")


# Left out, each for a reason: a generated id is valid by the schema yet names nothing, so
# a 404 is the right answer to "valid" data (positive acceptance); and the stateful checks
# assume that a created resource is fetchable at the id the generator picks next.
EXCLUDED = [positive_data_acceptance, use_after_free, ensure_resource_availability]


@pytest.mark.slow
def test_every_route_answers_within_its_schema_and_never_500(
    api: tuple[str, str], api_schema: Any
) -> None:
    url, secret = api
    headers = {"Authorization": f"Bearer {secret}"}
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert len(operations) >= 6
    failures: dict[str, str] = {}
    calls: dict[str, int] = {}
    for operation in operations:

        @given(case=operation.as_strategy())
        @hsettings(
            max_examples=25,
            deadline=None,
            database=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        )
        def check(case: Any) -> None:
            calls[case.operation.label] = calls.get(case.operation.label, 0) + 1
            case.call_and_validate(base_url=url, headers=headers, excluded_checks=EXCLUDED)

        try:
            check()
        except Exception as exc:  # collect every operation's failure, then report them all
            failures[operation.label] = f"{type(exc).__name__}: {str(exc)[:2000]}"
    assert failures == {}
    assert set(calls) == {o.label for o in operations}
    assert calls["POST /v1/search"] >= 10 and calls["POST /v1/retrieve"] >= 10
