"""Chat turns that retrieval must read in context: requests about a document itself
("summarize this", "what does page 12 say?") and follow-ups ("and page 12?", "what
about the warranty?") that only make sense after the turns before them.

Both are pure functions of text: :func:`document_request` says whether a message asks
for a document's opening or one of its pages; :func:`standalone_question` rewrites a
follow-up into a question that can be searched on its own, without a model. A chat
model, when one is configured, condenses instead (:func:`acondense_with_llm`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, Field

from tether.llm import ChatModel, parse_json_reply
from tether.text import normalize_text

#: A turn of the conversation before the question: ``{"role": "user" | "assistant",
#: "content": "..."}`` (OpenAI's message shape).
Turn = dict[str, str]

_DOC = r"(?:document|doc|pdf|file|paper|manual|article|report|book|guide|text)"
_THIS = r"(?:this|the|that|this\s+whole|the\s+whole|the\s+attached|my)"
_POLITE = r"(?:(?:can|could|would|will)\s+you\s+(?:please\s+)?|please\s+|pls\s+)?"
_END = r"[\s?!.,;:]*"
_OVERVIEW_WORDS = (
    r"(?:summari[sz]e|sum\s+up|give\s+(?:me\s+)?(?:a\s+|an\s+)?(?:summary|overview|gist)\s+of"
    r"|(?:what\s+is|what's|whats)\s+the\s+(?:gist|summary)\s+of|outline|skim|explain)"
)
#: "summarize this document", "what is this PDF about?", "give me an overview of the file".
_OVERVIEW = re.compile(
    _POLITE
    + r"(?:"
    + _OVERVIEW_WORDS
    + r"\s+"
    + _THIS
    + r"\s+"
    + _DOC
    + r"|(?:what\s+is|what's|whats)\s+"
    + _THIS
    + r"\s+"
    + _DOC
    + r"\s+(?:about|for)"
    + r"|(?:what\s+does|what\s+do)\s+"
    + _THIS
    + r"\s+"
    + _DOC
    + r"\s+(?:say|cover|contain)"
    + r"|(?:what's|what\s+is)\s+in\s+"
    + _THIS
    + r"\s+"
    + _DOC
    + r"|tl;?\s*dr"
    + r")"
    + _END
)
#: "summarize this" / "can you summarize it?": the open document, when there is one.
_BARE_OVERVIEW = re.compile(
    _POLITE
    + r"(?:summari[sz]e|sum\s+up|give\s+(?:me\s+)?(?:a\s+)?summary\s+of)\s+(?:this|it)"
    + _END
)
#: "what does page 12 say?", "show me page 3", "and page 12?", "p. 7".
_PAGE = re.compile(
    r"(?:and\s+|what\s+about\s+|how\s+about\s+)?"
    + _POLITE
    + r"(?:(?:what\s+(?:does|is\s+on|'s\s+on|is\s+written\s+on)|what'?s\s+on|show(?:\s+me)?"
    r"|read(?:\s+me)?|open|go\s+to|summari[sz]e|explain)\s+)?"
    + r"(?:the\s+)?(?:page|p\.|pg\.?)\s*(\d{1,5})"
    + r"(?:\s+(?:of|in)\s+(?:it|"
    + _THIS
    + r"\s+"
    + _DOC
    + r"))?"
    + r"(?:\s+(?:say|says|said|contain|contains|cover|covers|mean|means))?"
    + _END
)


@dataclass(frozen=True)
class DocumentRequest:
    """A request about a document itself: its ``overview`` (opening and outline), or
    one ``page``."""

    kind: Literal["overview", "page"]
    page: int | None = None

    def describe(self) -> str:
        if self.kind == "page":
            return f"a request for page {self.page} of the document"
        return "a request for an overview of the document"


def _plain(message: str) -> str:
    return " ".join(message.lower().replace("’", "'").split())


def document_request(message: str, *, open_document: bool = False) -> DocumentRequest | None:
    """The document request ``message`` makes, if it makes one. A bare "summarize this"
    counts only with an ``open_document`` (a chat's active PDF): otherwise it asks to
    reformat the last answer."""
    text = _plain(message)
    if match := _PAGE.fullmatch(text):
        return DocumentRequest("page", int(match.group(1)))
    if _OVERVIEW.fullmatch(text) or (open_document and _BARE_OVERVIEW.fullmatch(text)):
        return DocumentRequest("overview")
    return None


# -- follow-ups ------------------------------------------------------------------------

_WORD = re.compile(r"[a-z0-9][a-z0-9'._-]*")
_FOLLOW_UP_OPENING = re.compile(
    r"(?:and|also|but|so|what\s+about|how\s+about|and\s+what\s+about|what\s+if|same\s+for"
    r"|then|or)\b"
)
_REFERENCE = re.compile(r"\b(?:it|its|it's|that|this|those|these|they|them|their|there|one)\b")
_FUNCTION_WORDS = frozenset(
    "a an the and or but so also what about how if then is are was were be do does did can"
    " could would should will to of in on for with at by from as it its it's that this those"
    " these they them their there one i you we me my your our please tell show give more"
    " again same which who when where why".split()
)
#: A follow-up has at most this many words of its own that carry meaning.
MAX_FOLLOW_UP_TERMS = 3


def content_terms(text: str) -> list[str]:
    """The words of ``text`` that carry meaning (not function words), in order, once."""
    seen: dict[str, None] = {}
    for word in _WORD.findall(text.lower()):
        if word not in _FUNCTION_WORDS and len(word) > 1:
            seen.setdefault(word, None)
    return list(seen)


def is_follow_up(question: str) -> bool:
    """Whether ``question`` leans on the turns before it: it opens like a follow-up
    ("and ...", "what about ...") or refers back ("it", "that") with few terms of its
    own."""
    text = _plain(question)
    own = content_terms(text)
    if _FOLLOW_UP_OPENING.match(text):
        return len(own) <= MAX_FOLLOW_UP_TERMS + 1
    return bool(_REFERENCE.search(text)) and len(own) <= MAX_FOLLOW_UP_TERMS


def standalone_question(question: str, history: Sequence[Turn]) -> str:
    """``question`` made searchable on its own, without a model: a follow-up gets the
    meaning-carrying words of the last user turn that had any, appended ("and page 12?"
    after "how do I reset the sensor?" searches "and page 12? reset sensor"). A question
    that stands on its own is returned unchanged."""
    if not history or not is_follow_up(question):
        return question
    own = set(content_terms(question))
    for turn in reversed(history):
        if turn.get("role") != "user":
            continue
        carried = [t for t in content_terms(turn.get("content", "")) if t not in own]
        if carried:
            return f"{question} {' '.join(carried[:12])}"
    return question


class _Condensed(BaseModel):
    question: str = Field(min_length=1, max_length=2000)


_CONDENSE_PROMPT = (
    "Rewrite the user's last message as one standalone question that can be searched"
    " without the conversation: resolve pronouns and ellipsis from the earlier turns,"
    " keep names, numbers and page references, add nothing else. If it already stands"
    ' on its own, return it unchanged. Answer with JSON only: {"question": "..."}.'
)


def _condense_messages(question: str, history: Sequence[Turn]) -> list[dict[str, str]]:
    lines = [
        f"{turn.get('role', 'user')}: {normalize_text(turn.get('content', ''))[:1000]}"
        for turn in list(history)[-6:]
    ]
    conversation = "\n".join(lines)
    return [
        {"role": "system", "content": _CONDENSE_PROMPT},
        {"role": "user", "content": f"Conversation:\n{conversation}\n\nLast message: {question}"},
    ]


async def acondense_with_llm(chat: ChatModel, question: str, history: Sequence[Turn]) -> str:
    """The chat model's standalone question. Raises :class:`~tether.errors.LLMError` on
    failure or an unusable reply."""
    reply = await chat.acomplete(_condense_messages(question, history), max_tokens=200)
    return parse_json_reply(reply, _Condensed).question.strip()


def check_history(history: object) -> list[Turn]:
    """``history`` as a list of turns; :class:`ValueError` naming what is wrong."""
    if history is None:
        return []
    if isinstance(history, str | bytes) or not isinstance(history, Sequence):
        raise ValueError(f"history must be a list of {{role, content}} turns, not {history!r:.60}")
    turns = []
    for turn in history:
        if not isinstance(turn, dict) or not isinstance(turn.get("content"), str):
            raise ValueError(f"each turn of history must be {{role, content}}, not {turn!r:.60}")
        if turn.get("role") not in ("user", "assistant", "system"):
            raise ValueError(f"a turn's role must be user, assistant or system: {turn!r:.60}")
        turns.append({"role": turn["role"], "content": turn["content"]})
    return turns
