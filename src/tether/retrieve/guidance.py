"""What to tell the caller when nothing in scope grounds the question: a pure function
of the scope and what the search found."""

from __future__ import annotations

from tether.models import Scope, ScopeKind

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


def guidance(
    scope: Scope, *, has_documents: bool, found: int, closer: ScopeKind | None = None
) -> tuple[str, ScopeKind | None]:
    """The guidance text and the scope to suggest instead (``None``: there is no wider
    one). ``found`` is how many candidates the search had at all; ``closer`` names the
    wider scope found to hold a clearly better match, when one was."""
    where = _WHERE[scope.kind]
    if closer is not None:
        return (
            f"{_WHERE[closer].capitalize()} answers this better than {where}: search"
            f" {_WHERE[closer]} instead.",
            closer,
        )
    if not has_documents:
        opening = _EMPTY[scope.kind]
    elif not found:
        opening = f"Nothing in {where} matches the question."
    else:
        opening = f"Nothing in {where} is relevant enough to answer from."
    if scope.kind == "session":
        return (
            f"{opening} Search the whole workspace instead, or add a document that"
            " covers this to the chat.",
            "workspace",
        )
    if scope.kind == "workspace":
        return (
            f"{opening} Search the global library instead, or add documents that cover"
            " this to the workspace.",
            "global",
        )
    return f"{opening} Add documents that cover this to the library.", None
