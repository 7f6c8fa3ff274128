"""Tag rules: what a document's tags may hold, checked once at the door.

Tags (``domain``, ``source_type``, ``last_verified``, ``version``, ``project_id``) are
validated against the policy settings before anything is stored; a bad or (with
``policy.require_tags``) missing tag is an :class:`~tether.errors.InvalidTag` naming
the source and the field. Documents also carry a status: only ``active`` ones are
searched.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, date, datetime, timedelta
from typing import Any, get_args

from tether.errors import InvalidTag
from tether.models import DocumentStatus, Tags
from tether.settings import SOURCE_TYPES, PolicySettings

#: ``active``: searchable. ``draft``: not yet published. ``pending``: user-submitted, not
#: yet approved. Only active documents are ever searched (the policy's exclusions). A
#: source without a status keeps its document's (new documents are active).
DOCUMENT_STATUSES: tuple[str, ...] = get_args(DocumentStatus)

TAG_FIELDS = ("domain", "source_type", "last_verified", "version", "project_id")
REQUIRED_TAGS = ("domain", "source_type", "last_verified", "version")
MAX_TAG_CHARS = 200
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
#: A domain when ``policy.domains`` is empty (open): ``hr``, ``freshdesk-ai``, ``eu.sales``.
DOMAIN_SLUG = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")


def validate_tags(
    source: str, raw: Tags | Mapping[str, Any] | None, policy: PolicySettings
) -> Tags | None:
    """``raw`` checked against the policy, as :class:`Tags` (``None`` when there are none
    and none are required). Raises :class:`InvalidTag` naming the source and the field:
    an unknown tag, a domain outside ``policy.domains`` (or, when that is empty, one that is
    not a slug such as ``hr``), a source type outside
    ``policy | guide | log | link | contract``, a ``last_verified`` that is not ISO-8601
    (or is in the future), an empty or over-long value, or, with
    ``policy.require_tags``, a missing one. ``last_verified`` is stored as
    ``YYYY-MM-DD`` or, for a time, ``YYYY-MM-DDTHH:MM:SSZ`` (UTC)."""
    if raw is None:
        if policy.require_tags:
            raise InvalidTag(source, "domain", "missing (policy.require_tags is on)")
        return None
    values = raw.to_dict() if isinstance(raw, Tags) else raw
    if not isinstance(values, Mapping):
        raise InvalidTag(
            source, "tags", f"must be a mapping of tag to value, not {type(raw).__name__}"
        )
    unknown = [k for k in values if k not in TAG_FIELDS]
    if unknown:
        raise InvalidTag(
            source, str(unknown[0]), f"unknown tag; the tags are {', '.join(TAG_FIELDS)}"
        )
    clean: dict[str, str | None] = {}
    for name in TAG_FIELDS:
        value = values.get(name)
        if value is None:
            if policy.require_tags and name in REQUIRED_TAGS:
                raise InvalidTag(source, name, "missing (policy.require_tags is on)")
            clean[name] = None
            continue
        if name == "last_verified":
            clean[name] = _iso(source, value)
            continue
        if name == "version" and isinstance(value, int | float) and not isinstance(value, bool):
            value = str(value)
        if not isinstance(value, str):
            raise InvalidTag(source, name, f"must be text, not {type(value).__name__}")
        if not value.strip() or _CONTROL.search(value) or len(value) > MAX_TAG_CHARS:
            raise InvalidTag(
                source, name, f"must be 1-{MAX_TAG_CHARS} printable characters, not {value!r:.60}"
            )
        clean[name] = value.strip()
    if all(v is None for v in clean.values()):
        return None
    _check_domain(source, clean["domain"], policy)
    if clean["source_type"] is not None and clean["source_type"] not in SOURCE_TYPES:
        raise InvalidTag(
            source,
            "source_type",
            f"{clean['source_type']!r} is not one of {', '.join(SOURCE_TYPES)}",
        )
    return Tags(**clean)


def _check_domain(source: str, domain: str | None, policy: PolicySettings) -> None:
    """A domain is one of ``policy.domains`` when that lists any, else any slug."""
    if domain is None:
        return
    if policy.domains and domain not in policy.domains:
        raise InvalidTag(source, "domain", f"{domain!r} is not one of {', '.join(policy.domains)}")
    if not policy.domains and not DOMAIN_SLUG.fullmatch(domain):
        raise InvalidTag(
            source,
            "domain",
            f"{domain!r} is not a slug: lower-case letters, digits, '-', '_' and '.',"
            " starting with a letter or a digit, at most 64 characters",
        )


def _iso(source: str, value: Any) -> str:
    if isinstance(value, datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=UTC)
    elif isinstance(value, date):
        # A day of slack: "today" east of UTC is still tomorrow in UTC for a while.
        if value > (datetime.now(UTC) + timedelta(days=1)).date():
            raise InvalidTag(source, "last_verified", f"{value.isoformat()} is in the future")
        return value.isoformat()
    elif isinstance(value, str):
        text = value.strip()
        try:
            if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
                return _iso(source, date.fromisoformat(text))
            moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise InvalidTag(
                source, "last_verified", f"{value!r:.60} is not an ISO-8601 date or time"
            ) from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
    else:
        raise InvalidTag(
            source, "last_verified", f"must be an ISO-8601 date or time, not {type(value).__name__}"
        )
    moment = moment.astimezone(UTC)
    if moment > datetime.now(UTC) + timedelta(minutes=5):  # some clock skew
        raise InvalidTag(source, "last_verified", f"{moment.isoformat()} is in the future")
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
