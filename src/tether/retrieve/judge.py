"""The LLM answerability judge: does any of these passages answer the question?

With ``rag.enable_llm_judge`` and a chat model, the first ``rag.judge_candidates``
reranked candidates are shown to the model, numbered, with the question. It answers
with JSON only::

    {"answerable": true, "passages": [2, 1]}

``answerable`` is whether the passages together answer the question (not "are about its
topic"); ``passages`` are the numbers of those that hold the answer. The verdict replaces
the local evidence threshold: an answerable verdict grounds the result on the passages
it names (every shown passage when it names none), an unanswerable one leaves it
ungrounded whatever the evidence. Any failure (an error, the chat model's timeout, a
reply that is not that JSON) keeps the local judgment and says so among the
degradations.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field

from tether.llm import ChatModel, parse_json_reply
from tether.retrieve.rerank import Candidate, numbered_passages

#: The most of a passage the judge is shown: a whole chunk, as the context would hold it
#: (a chunk of 256 MiniLM tokens is about 1,000-1,300 characters).
PASSAGE_CHARS = 2000


class _Verdict(BaseModel):
    answerable: bool
    passages: list[int] = Field(default_factory=list, max_length=100)


@dataclass(frozen=True)
class Verdict:
    """The judge's answer: whether the question is answerable from the passages, and
    the chunk ids of those it named as holding the answer (in the order shown)."""

    answerable: bool
    supporting: tuple[int, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"answerable": self.answerable, "supporting": list(self.supporting)}


def _prompt(question: str, shown: list[Candidate]) -> list[dict[str, str]]:
    passages = numbered_passages(shown, PASSAGE_CHARS)
    return [
        {
            "role": "system",
            "content": (
                "You decide whether a question can be answered from the passages given, and"
                " from nothing else. A passage on the same topic that does not contain the"
                " answer does not count. Answer with JSON only:"
                ' {"answerable": true or false, "passages": [numbers of the passages that'
                " contain the answer]}."
            ),
        },
        {"role": "user", "content": f"Question: {question[:2000]}\n\nPassages:\n\n{passages}"},
    ]


def _verdict(reply: str, shown: list[Candidate]) -> Verdict:
    parsed = parse_json_reply(reply, _Verdict)
    named = [n for n in dict.fromkeys(parsed.passages) if 1 <= n <= len(shown)]
    if not parsed.answerable:
        return Verdict(False, ())
    chosen = named or list(range(1, len(shown) + 1))
    return Verdict(True, tuple(shown[n - 1].hit.chunk_id for n in sorted(chosen)))


async def ajudge(chat: ChatModel, question: str, shown: list[Candidate]) -> Verdict:
    """The chat model's verdict on ``shown``; raises :class:`~tether.errors.LLMError`
    on any failure (the caller keeps the local judgment)."""
    reply = await chat.acomplete(_prompt(question, shown), max_tokens=60 + 4 * len(shown))
    return _verdict(reply, shown)
