"""Masking secrets and personal data in text that is kept (the audit log's queries).

:func:`sanitize_query` replaces, in this order: private-key blocks, JWTs, bearer and
basic credentials, well-known API key shapes (OpenAI ``sk-``, GitHub ``ghp_``/``github_pat_``,
Slack ``xox?-``, AWS ``AKIA``/``ASIA``, Google ``AIza``, Stripe ``sk_live``/``rk_live``),
``key=value`` pairs whose key names a secret (password, token, api_key, secret, ...),
URLs' user:password parts, e-mail addresses, long hex or base64-like runs (32+
characters), and card-like digit runs (13-19 digits). Control characters are dropped,
whitespace is collapsed, and the result is capped at ``max_chars``. Each mask names what
it replaced (``[EMAIL]``, ``[TOKEN]``, ...), so the log stays readable.
"""

from __future__ import annotations

import re

from tether.text import valid_text

MAX_LOGGED_QUERY_CHARS = 500

_RULES: list[tuple[re.Pattern[str], str]] = [
    (
        re.compile(
            r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)", re.S
        ),
        "[PRIVATE_KEY]",
    ),
    (re.compile(r"\beyJ[\w-]{5,}\.[\w-]{5,}\.[\w-]{5,}"), "[JWT]"),
    (re.compile(r"(?i)\b(bearer|basic|token)\s+[\w.~+/=-]{8,}"), r"\1 [TOKEN]"),
    (
        re.compile(
            r"\b(?:sk-(?:proj-|ant-)?[\w-]{16,}|gh[pousr]_\w{20,}|github_pat_\w{20,}"
            r"|xox[abposr]-[\w-]{10,}|(?:AKIA|ASIA)[A-Z0-9]{16}|AIza[\w-]{30,}"
            r"|(?:sk|rk|pk)_(?:live|test)_\w{16,})"
        ),
        "[API_KEY]",
    ),
    (
        re.compile(
            r"(?i)\b([\w-]*(?:password|passwd|pwd|secret|token|api[\s_-]?key|apikey|access[_-]?key"
            r"|private[_-]?key|client[_-]?secret|auth)[\w-]*)(\s*[:=]\s*|\s+is\s+)"
            r"(\"[^\"]*\"|'[^']*'|\S+)"
        ),
        r"\1\2[SECRET]",
    ),
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s:@]+:[^/\s@]+@"), r"\1[CREDENTIALS]@"),
    (re.compile(r"(?i)\b[\w.%+-]+@[\w-]+(?:\.[\w-]+)*\.[a-z]{2,}\b"), "[EMAIL]"),
    (re.compile(r"\b[0-9a-fA-F]{32,}\b"), "[TOKEN]"),
    (
        re.compile(r"\b(?=[\w+/-]*\d)(?=[\w+/-]*[A-Za-z])[\w+/-]{32,}={0,2}"),
        "[TOKEN]",
    ),
    (re.compile(r"\b(?:\d[ -]?){12,18}\d\b"), "[NUMBER]"),
]
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def sanitize_query(text: str, max_chars: int = MAX_LOGGED_QUERY_CHARS) -> str:
    """``text`` with secrets, e-mail addresses and tokens masked, capped at ``max_chars``
    (lone surrogates, which no database can store, become U+FFFD)."""
    text = _CONTROL.sub("", valid_text(text))
    # Mask before cutting, so that a cut cannot leave half a secret unrecognised.
    for pattern, replacement in _RULES:
        text = pattern.sub(replacement, text)
    text = " ".join(text.split())
    if len(text) > max_chars:
        text = text[: max_chars - 1].rstrip() + "…"
    return text
