"""Does this message need retrieval? A fast local classifier, and an optional LLM one.

The local classifier is a handful of anchored patterns over the whole message, so it
only ever skips messages that are *nothing but* a greeting, thanks, small talk, an
arithmetic expression, or a request to reformat the previous answer. Anything else,
including a greeting followed by a question ("hi, how do I reset the sensor?"), is
retrieved for: skipping wrongly costs an ungrounded answer, retrieving wrongly costs a
few milliseconds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, Field

from tether.llm import ChatModel, parse_json_reply

Category = Literal[
    "question", "document", "greeting", "thanks", "small_talk", "arithmetic", "formatting"
]


@dataclass(frozen=True)
class Decision:
    needed: bool
    category: Category
    reason: str
    by: Literal["local", "llm"] = "local"

    def to_dict(self) -> dict[str, object]:
        return {
            "needed": self.needed,
            "category": self.category,
            "reason": self.reason,
            "by": self.by,
        }


_NAME = r"(?:,?\s+(?:there|all|everyone|everybody|folks|team|guys|tether|bot|friend))?"
_END = r"[\s!.,;:?~*^()\-\u2600-\u27bf\U0001f300-\U0001faff]*"  # punctuation, :) and emoji
# What a reformatting request refers to, and what it asks for.
_THAT = (
    r"(?:this|that|it|the\s+above|your\s+(?:last\s+)?(?:answer|reply|response|message)"
    r"|the\s+(?:last|previous)\s+(?:answer|reply|response|message))"
)
_FORMAT = (
    r"(?:(?:as|in|into|to)\s+(?:a\s+|an\s+)?(?:[a-z]+\s+)?(?:table|list|numbered\s+list|bullet(?:ed)?"
    r"\s+(?:points|list)|bullets|markdown|json|csv|yaml|html|plain\s+text|prose|paragraphs?"
    r"|an?\s+email|email|summary|one\s+(?:sentence|paragraph)|english|german|french|spanish"
    r"|italian|portuguese|dutch|polish|chinese|japanese|korean)"
    r"|shorter|longer|simpler|clearer|more\s+\w+|less\s+\w+|formal|informal|casual)"
)
_PATTERNS: list[tuple[Category, re.Pattern[str]]] = [
    (
        "greeting",
        re.compile(
            r"(?:hi+|hello+|hey+|hiya|howdy|yo|greetings|good\s+(?:morning|afternoon|evening|day)"
            r"|hallo|bonjour|hola|ciao)" + _NAME + _END
        ),
    ),
    (
        "thanks",
        re.compile(
            r"(?:(?:ok(?:ay)?|great|perfect|awesome|cool|nice)[\s,!.]+)?"
            r"(?:thanks?(?:\s+(?:a\s+lot|so\s+much|very\s+much|again))?|thank\s+you"
            r"(?:\s+(?:so\s+much|very\s+much|again))?|thx|ty|tysm|cheers|much\s+appreciated"
            r"|appreciate\s+it|merci|danke|gracias)" + _NAME + _END
        ),
    ),
    (
        "small_talk",
        re.compile(
            r"(?:how\s+are\s+you(?:\s+doing)?(?:\s+today)?|how's\s+it\s+going|what'?s\s+up|sup"
            r"|who\s+are\s+you|what\s+are\s+you|are\s+you\s+(?:there|a\s+bot|human)"
            r"|bye|goodbye|good\s*night|see\s+you(?:\s+later)?|later|ok(?:ay)?|k|sure|yes|no|nope"
            r"|yep|yeah|cool|great|nice|awesome|perfect|got\s+it|sounds\s+good|lol|haha+"
            r"|never\s*mind|nvm)" + _END
        ),
    ),
    (
        # An operator that is not also a date or phone separator ("2024-01-15",
        # "12/2024", "555-0199" are not sums), or an explicit "what is" / "calculate".
        "arithmetic",
        re.compile(
            r"(?:(?:what\s+is|what's|calculate|compute|solve|evaluate)\s+"
            r"[-+(]*\d[\d.,]*\)*(?:\s*(?:[-+*/x×÷^%]|\*\*|plus|minus|times|divided\s+by)"
            r"\s*[-+(]*\d[\d.,]*\)*)+"
            r"|[-+(]*\d[\d.,]*\)*(?:\s*(?:[-/]\s*[-+(]*\d[\d.,]*\)*\s*)?"
            r"(?:[+*x×÷^%]|\*\*|\s(?:plus|minus|times|divided\s+by)\s|\s[-/]\s)"
            r"\s*[-+(]*\d[\d.,]*\)*)+)"
            r"\s*(?:=\s*\??)?" + _END
        ),
    ),
    (
        "formatting",
        re.compile(
            r"(?:(?:can|could|would)\s+you\s+|please\s+)?"
            r"(?:(?:re-?format|format|re-?write|rephrase|shorten|lengthen|expand|simplify"
            r"|summari[sz]e|translate|proofread)\s+" + _THAT + r"(?:\s+" + _FORMAT + r")?"
            r"|(?:make|turn|convert|put)\s+" + _THAT + r"\s+" + _FORMAT + r")"
            r"(?:\s*,?\s*please)?" + _END
        ),
    ),
]


def decide_locally(message: str) -> Decision:
    """Skip retrieval only for messages that are wholly greeting, thanks, small talk,
    arithmetic or a reformatting request; everything else needs retrieval."""
    text = " ".join(message.lower().replace("’", "'").split())
    for category, pattern in _PATTERNS:
        if pattern.fullmatch(text):
            return Decision(False, category, f"{category.replace('_', ' ')}: no retrieval needed")
    return Decision(True, "question", "a question that may be answered from documents")


class _LLMDecision(BaseModel):
    retrieve: bool
    reason: str = Field("", max_length=500)


_DECIDE_PROMPT = (
    "You decide whether a chat message needs a search of the user's documents before it"
    " is answered. Greetings, thanks, small talk, arithmetic and requests to reformat the"
    " previous answer do not; questions about facts, procedures, policies, documents or"
    ' anything the documents might cover do. Answer with JSON only: {"retrieve": true or'
    ' false, "reason": "a few words"}.'
)


def _messages(message: str) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": _DECIDE_PROMPT},
        {"role": "user", "content": message[:4000]},
    ]


def _from_reply(reply: str) -> Decision:
    parsed = parse_json_reply(reply, _LLMDecision)
    category: Category = "question" if parsed.retrieve else "small_talk"
    return Decision(parsed.retrieve, category, parsed.reason or "LLM decision", by="llm")


async def adecide_with_llm(chat: ChatModel, message: str) -> Decision:
    """The chat model's decision. Raises :class:`~tether.errors.LLMError` on failure."""
    return _from_reply(await chat.acomplete(_messages(message), max_tokens=100))
