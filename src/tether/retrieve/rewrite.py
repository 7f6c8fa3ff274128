"""Query rewriting for RAG-Fusion: a chat model writes 1-3 other phrasings of a question.

The reply must be JSON, ``{"queries": ["...", ...]}``, validated with pydantic. Blank
entries, repeats and copies of the original are dropped and the list is cut to the
count asked for; if nothing usable is left the :class:`Rewrite` says so, and the caller
falls back to the original question alone, as it does when the call itself fails (an
:class:`~tether.errors.LLMError`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import BaseModel, Field

from tether.errors import LLMError
from tether.llm import ChatModel, parse_json_reply

MAX_QUERY_CHARS = 500


class _Rewrites(BaseModel):
    queries: list[str] = Field(min_length=1, max_length=10)


@dataclass(frozen=True)
class Rewrite:
    """The rewrites that will run besides the original, and what went wrong, if anything."""

    queries: tuple[str, ...] = ()
    degradation: str | None = None
    notes: list[str] = field(default_factory=list)


def _prompt(question: str, count: int) -> list[dict[str, str]]:
    plural = "one other phrasing" if count == 1 else f"{count} different phrasings"
    return [
        {
            "role": "system",
            "content": (
                f"You help a search engine. Write {plural} of the user's question that"
                " could match the wording of documents that answer it: use synonyms, the"
                " likely technical terms, or a more specific or more general form. Keep"
                " each one a single search query under 30 words, in the question's"
                ' language. Answer with JSON only: {"queries": ["...", ...]}.'
            ),
        },
        {"role": "user", "content": question[:4000]},
    ]


def _clean(question: str, reply: str, count: int) -> Rewrite:
    try:
        parsed = parse_json_reply(reply, _Rewrites)
    except LLMError as exc:
        return Rewrite(degradation=f"query rewrite unusable, original query only: {exc}")
    seen = {" ".join(question.lower().split())}
    kept: list[str] = []
    notes: list[str] = []
    for query in parsed.queries:
        text = " ".join(query.split())[:MAX_QUERY_CHARS]
        key = text.lower()
        if not text or key in seen:
            notes.append(f"dropped a blank or repeated rewrite: {query[:60]!r}")
            continue
        seen.add(key)
        kept.append(text)
    if len(kept) > count:
        notes.append(f"the model wrote {len(kept)} rewrites; kept the first {count}")
        kept = kept[:count]
    if not kept:
        return Rewrite(
            degradation="query rewrite gave no usable new phrasing, original query only",
            notes=notes,
        )
    return Rewrite(tuple(kept), notes=notes)


async def arewrite_query(chat: ChatModel, question: str, count: int) -> Rewrite:
    """The model's rewrites of ``question`` (an unusable reply is a :class:`Rewrite` with
    a degradation). Raises :class:`~tether.errors.LLMError` when the call fails; the
    caller bounds and handles the call."""
    reply = await chat.acomplete(_prompt(question, count), max_tokens=300)
    return _clean(question, reply, count)
