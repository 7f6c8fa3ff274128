"""Haystack integration: tether as a Haystack retriever component.

``pip install 'tether[haystack]'``. :class:`TetherRetriever` is a ``@component`` with
``run(query, filters=None, top_k=None)`` and ``run_async`` of the same shape, returning
``{"documents": [...], "reason": ...}``, so it is the first component of a RAG pipeline::

    from haystack import Pipeline
    from tether.haystack import TetherRetriever

    pipe = Pipeline()
    pipe.add_component("retriever", TetherRetriever(t, scope="session", session_id="chat-1"))
    pipe.add_component("prompt", PromptBuilder(template))
    pipe.connect("retriever.documents", "prompt.documents")

Each document is one passage (see :mod:`tether._passages`): its text as ``content``,
its score, and ``meta`` with the citation. A retrieval that is not grounded (or that the
decision skipped) gives no documents, and ``reason`` says why.

Haystack sends usage data to PostHog unless ``HAYSTACK_TELEMETRY_ENABLED=False`` is set
before it is imported; tether leaves that choice to the application.
"""

# No `from __future__ import annotations`: Haystack makes the input sockets from run()'s
# annotations, and 2.x reads them as written (strings under that import); 3.x takes both.

from dataclasses import replace
from typing import Any

try:
    from haystack import Document, component
except ImportError as exc:
    raise ImportError(
        f"tether.haystack needs haystack-ai: pip install 'tether[haystack]' ({exc})"
    ) from exc

from tether import Filters, Scope, SearchMode, Tether
from tether._passages import (
    Method,
    PassageOptions,
    Passages,
    ScopeName,
    afind_passages,
    find_passages,
)


@component
class TetherRetriever:
    """tether as a Haystack retriever over one scope.

    ``method="retrieve"`` (the default) runs :meth:`Tether.retrieve`: one document per
    citation, only when the result is grounded; ``"search"`` runs :meth:`Tether.search`:
    the ``top_k`` best chunks, ranked by ``mode``. ``scope``, ``session_id`` and
    ``workspace_id`` name the scope as :meth:`Tether.search` takes them (default
    ``rag.scope``); it is resolved here, so a missing id fails now, not in a pipeline
    run. ``top_k`` (tether's ``k``) caps the documents (retrieve: default
    ``rag.max_chunks``; search: default 10); ``filters`` narrow the scope by tags or
    documents. ``run``'s ``filters`` and ``top_k``, when given, replace the ones set here.
    """

    def __init__(
        self,
        tether: Tether,
        *,
        method: Method = "retrieve",
        scope: Scope | ScopeName | None = None,
        session_id: str | None = None,
        workspace_id: str | None = None,
        top_k: int | None = None,
        filters: Filters | None = None,
        mode: SearchMode = "hybrid",
    ) -> None:
        self.tether = tether
        self.options = PassageOptions.build(
            tether,
            method=method,
            scope=scope,
            session_id=session_id,
            workspace_id=workspace_id,
            k=top_k,
            filters=filters,
            mode=mode,
        )

    @component.output_types(documents=list[Document], reason=str | None)
    def run(
        self, query: str, filters: Filters | None = None, top_k: int | None = None
    ) -> dict[str, Any]:
        """``documents``: the passages for ``query``, best first; ``reason``: why there
        are none (``None`` when there are some)."""
        return _output(find_passages(self.tether, query, self._options(filters, top_k)))

    @component.output_types(documents=list[Document], reason=str | None)
    async def run_async(
        self, query: str, filters: Filters | None = None, top_k: int | None = None
    ) -> dict[str, Any]:
        """:meth:`run` for ``Pipeline.run_async``: retrieval through
        :meth:`Tether.aretrieve`, search in a thread."""
        options = self._options(filters, top_k)
        return _output(await afind_passages(self.tether, query, options))

    def _options(self, filters: Filters | None, top_k: int | None) -> PassageOptions:
        if filters is None and top_k is None:
            return self.options
        return replace(
            self.options,
            filters=self.options.filters if filters is None else filters,
            k=self.options.k if top_k is None else top_k,
        )


def _output(found: Passages) -> dict[str, Any]:
    documents = [
        Document(id=p.id, content=p.text, meta=p.metadata, score=p.score) for p in found.passages
    ]
    return {"documents": documents, "reason": found.reason}


__all__ = ["TetherRetriever"]
