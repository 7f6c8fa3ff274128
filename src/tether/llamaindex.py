"""LlamaIndex integration: tether as a LlamaIndex retriever.

``pip install 'tether[llamaindex]'``. :class:`TetherRetriever` is a
``llama_index.core.retrievers.BaseRetriever``, so it goes wherever LlamaIndex takes a
retriever (``RetrieverQueryEngine``, ``ContextChatEngine``, a ``RouterRetriever``)::

    from llama_index.core.query_engine import RetrieverQueryEngine
    from tether.llamaindex import TetherRetriever

    retriever = TetherRetriever(t, scope="session", session_id="chat-1")
    engine = RetrieverQueryEngine.from_args(retriever, llm=llm)

Each node is one passage (see :mod:`tether._passages`): its text, its score (the
citation's relevance, or the hit's search score) and metadata with the citation. A
retrieval that is not grounded (or that the decision skipped) gives no nodes;
:attr:`TetherRetriever.last_reason` says why.
"""

from __future__ import annotations

try:
    from llama_index.core.callbacks import CallbackManager
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import (
        NodeRelationship,
        NodeWithScore,
        QueryBundle,
        RelatedNodeInfo,
        TextNode,
    )
except ImportError as exc:
    raise ImportError(
        f"tether.llamaindex needs llama-index-core: pip install 'tether[llamaindex]' ({exc})"
    ) from exc

from tether import Filters, RetrievalResult, Scope, SearchMode, SearchResults, Tether
from tether._passages import (
    PROMPT_METADATA,
    Method,
    Passage,
    PassageOptions,
    Passages,
    ScopeName,
    afind_passages,
    find_passages,
)


class TetherRetriever(BaseRetriever):
    """tether as a LlamaIndex retriever over one scope.

    ``method="retrieve"`` (the default) runs :meth:`Tether.retrieve`: one node per
    citation, only when the result is grounded; ``"search"`` runs :meth:`Tether.search`:
    the ``k`` best chunks, ranked by ``mode``. ``scope``, ``session_id`` and
    ``workspace_id`` name the scope as :meth:`Tether.search` takes them (default
    ``rag.scope``); it is resolved here, so a missing id fails now, not at the first
    query. ``k`` caps the nodes (retrieve: default ``rag.max_chunks``; search: default
    10); ``filters`` narrow the scope by tags or documents.

    :attr:`last_reason` is why the latest call gave no nodes (``None`` when it gave
    some) and :attr:`last_result` what tether returned; one retriever shared by
    concurrent calls keeps only one of them.
    """

    def __init__(
        self,
        tether: Tether,
        *,
        method: Method = "retrieve",
        scope: Scope | ScopeName | None = None,
        session_id: str | None = None,
        workspace_id: str | None = None,
        k: int | None = None,
        filters: Filters | None = None,
        mode: SearchMode = "hybrid",
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
    ) -> None:
        super().__init__(callback_manager=callback_manager, verbose=verbose)
        self.tether = tether
        self.options = PassageOptions.build(
            tether,
            method=method,
            scope=scope,
            session_id=session_id,
            workspace_id=workspace_id,
            k=k,
            filters=filters,
            mode=mode,
        )
        self.last_reason: str | None = None
        self.last_result: RetrievalResult | SearchResults | None = None

    def __repr__(self) -> str:
        q = self.options
        return f"TetherRetriever(method={q.method!r}, scope={q.scope.kind}:{q.scope.id}, k={q.k})"

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self._nodes(find_passages(self.tether, query_bundle.query_str, self.options))

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        found = await afind_passages(self.tether, query_bundle.query_str, self.options)
        return self._nodes(found)

    def _nodes(self, found: Passages) -> list[NodeWithScore]:
        self.last_reason, self.last_result = found.reason, found.result
        return [NodeWithScore(node=_node(p), score=p.score) for p in found.passages]


def _node(passage: Passage) -> TextNode:
    """The passage as a node whose source is its tether document; a prompt sees the
    citation label, title, section and page that it has, never the ids."""
    shown = {k for k, v in passage.metadata.items() if k in PROMPT_METADATA and v is not None}
    hidden = [key for key in passage.metadata if key not in shown]
    source = RelatedNodeInfo(node_id=passage.metadata["document_id"])
    return TextNode(
        id_=passage.id,
        text=passage.text,
        metadata=passage.metadata,
        relationships={NodeRelationship.SOURCE: source},
        excluded_llm_metadata_keys=hidden,
        excluded_embed_metadata_keys=list(passage.metadata),
    )


__all__ = ["TetherRetriever"]
