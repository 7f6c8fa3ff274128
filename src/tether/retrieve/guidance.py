"""What to tell the caller when nothing in scope grounds the question, or a search found
nothing: pure functions of the scope and what the search found. The scope suggested
instead is always wider than the one searched; the global library has none wider."""

from __future__ import annotations

from tether.models import GLOBAL_WORKSPACE, Scope, ScopeKind

_WHERE = {
    "session": "this chat's documents",
    "workspace": "this workspace",
    "global": "the global library",
}
_EMPTY = {
    "session": "This chat has no documents yet.",
    "workspace": "This workspace has no documents yet.",
    "global": "The global library has no documents yet.",
}
#: What to do instead, and the wider scope it names (``None``: there is none).
_ADVICE: dict[ScopeKind, tuple[str, ScopeKind | None]] = {
    "session": (
        "Search the whole workspace instead, or add a document that covers this to the chat.",
        "workspace",
    ),
    "workspace": (
        "Search the global library instead, or add documents that cover this to the workspace.",
        "global",
    ),
    "global": ("Add documents that cover this to the library.", None),
}
#: The advice when the wider scope holds no document the scope does not: searching it
#: could find nothing new, so only adding documents is left.
_ALONE: dict[ScopeKind, str] = {
    "session": "Add a document that covers this to the chat; the workspace holds no other.",
    "workspace": "Add documents that cover this to the workspace; the global library holds none.",
    "global": _ADVICE["global"][0],
}


def kind_of(scope: Scope) -> ScopeKind:
    """The kind of scope ``scope`` is to its reader: the global library's own workspace
    is the global library, whichever way it was named."""
    if scope.kind == "workspace" and scope.id == GLOBAL_WORKSPACE:
        return "global"
    return scope.kind


def guidance(
    scope: Scope,
    *,
    has_documents: bool,
    found: int,
    closer: ScopeKind | None = None,
    wider_holds_more: bool = True,
) -> tuple[str, ScopeKind | None]:
    """The guidance text and the scope to suggest instead (``None``: there is no wider
    one, or it holds no document ``scope`` does not). ``found`` is how many candidates
    the search had at all; ``closer`` names the wider scope found to hold a clearly better
    match, when one was."""
    kind = kind_of(scope)
    where = _WHERE[kind]
    if closer is not None:
        return (
            f"{_WHERE[closer].capitalize()} answers this better than {where}: search"
            f" {_WHERE[closer]} instead.",
            closer,
        )
    if not has_documents:
        opening = _EMPTY[kind]
    elif not found:
        opening = f"Nothing in {where} matches the question."
    else:
        opening = f"Nothing in {where} is relevant enough to answer from."
    advice, wider = _ADVICE[kind] if wider_holds_more else (_ALONE[kind], None)
    return f"{opening} {advice}", wider


def no_matches(scope: Scope, *, wider_holds_more: bool = True) -> tuple[str, ScopeKind | None]:
    """What to tell a search that found nothing in ``scope``, and the wider scope to
    try (``None``: nothing is wider than the global library, or nothing new is there)."""
    kind = kind_of(scope)
    advice, wider = _ADVICE[kind] if wider_holds_more else (_ALONE[kind], None)
    if kind == "global":
        return f"No matches in the global library, and no scope is wider. {advice}", None
    return f"No matches in {scope.kind} {scope.id!r}. {advice}", wider
