"""Grounding in the pipeline: each candidate's evidence in its scope, and whether the
wider scope holds a clearly closer match (see :mod:`tether.retrieve.evidence` for what
evidence is made of)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from tether.ingest.chunking import context_header
from tether.models import Filters, Scope, ScopeKind
from tether.retrieve.crossencoder import CrossEncoderScorer, PassageScorer
from tether.retrieve.distinctive import (
    CommonWords,
    code_cores,
    code_terms,
    command_terms,
    compound_names,
    number_terms,
    own_files,
    own_names,
    placeholder,
    proper_names,
    with_parts,
    word_forms,
)
from tether.retrieve.evidence import (
    Evidence,
    QuestionTerms,
    agreement,
    asked_sentence,
    evidence,
    question_terms,
    search_terms,
)
from tether.retrieve.guidance import guidance
from tether.retrieve.rerank import Candidate, metadata_priority
from tether.retrieve.search import Candidates, Ranked, Searcher, SearchResults
from tether.retrieve.shortforms import abbreviated, clipped, leads_a_name, misspelt, writes
from tether.settings import Settings
from tether.store import Store
from tether.text import DEFAULT_LANGUAGE, capitals


@dataclass
class Judged:
    """The question's weighted terms and each candidate's evidence."""

    terms: QuestionTerms
    evidence: dict[int, Evidence]
    vectors: bool
    #: Each candidate's probability from the cross-encoder, when one is configured.
    model: dict[int, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Closer:
    """A wider scope that answers the question clearly better than the asked one."""

    kind: Any
    where: str
    evidence: float
    here: float


def agreed(found: Candidates) -> float | None:
    """How far one query's lexical and vector sides agree (None: no vector side ran)."""
    if not found.vectors_ran:
        return None
    return agreement([c for c, _ in found.lexical], [c for c, _ in found.vector])


class Grounder:
    """Evidence for the candidates of one store's searches (blocking: call in a thread)."""

    def __init__(
        self,
        store: Store,
        settings: Settings,
        searcher: Searcher,
        scorer: PassageScorer | None = None,
    ) -> None:
        self.store = store
        self.settings = settings
        self.searcher = searcher
        path = settings.rag.rerank.model_path
        self.scorer = scorer or (CrossEncoderScorer(path) if path else None)
        self.common_words = CommonWords.packaged()

    def candidates(
        self,
        question: str,
        question_vector: np.ndarray | None,
        top: Ranked,
        scope: Scope,
        *,
        session_id: str | None,
        filters: Filters | None,
        agreed: float | None,
    ) -> tuple[list[Candidate], Judged]:
        """The candidates of ``top`` with their evidence (their relevance) in ``scope``;
        ``agreed``: how far the lexical and vector searches agreed."""
        rows = self.store.candidate_rows([cid for cid, _ in top], session_id)
        cosines: dict[int, float] = {}
        vectors = self.searcher.vectors if question_vector is not None else None
        if vectors is not None:
            cosines = vectors.cosines(question_vector, [cid for cid, _ in top])
        texts = [row.hit.text for row in rows.values()]
        terms = self.question_terms(question, scope, filters, candidate_texts=texts)
        priorities = self.settings.policy.priorities
        candidates, judged = [], Judged(terms, {}, vectors=bool(cosines))
        for chunk_id, fused in top:
            row = rows.get(chunk_id)
            if row is None:
                continue  # deleted since the search
            cosine = cosines.get(chunk_id) if cosines else None
            found = evidence(
                terms,
                row.hit.text,
                cosine,
                agreed=agreed if cosine is not None else None,
                header=context_header(row.hit.title, row.hit.section_title),
            )
            judged.evidence[chunk_id] = found
            priority = metadata_priority(row.metadata, priorities.get(row.source_type or "", 0.0))
            candidates.append(
                Candidate(
                    hit=row.hit,
                    fused=fused,
                    relevance=found.evidence,
                    match=found.match,
                    priority=priority,
                    recency=row.recency,
                    token_count=row.token_count,
                )
            )
        if self.scorer is not None and candidates:
            scores = self.scorer.score_pairs(question, [c.hit.text for c in candidates])
            judged.model = {c.hit.chunk_id: p for c, p in zip(candidates, scores, strict=True)}
            pairs = zip(candidates, scores, strict=True)
            candidates = [replace(c, relevance=p, match=p) for c, p in pairs]
        return candidates, judged

    def judge(self, results: SearchResults, filters: Filters | None) -> dict[int, float]:
        """Each hit's evidence (0..1) that it answers the search's query, by chunk id: the
        relevance :meth:`candidates` gives the pipeline's candidates, from the vectors and
        the lexical and vector lists the search itself ran."""
        found = results.candidates
        judged, _ = self.candidates(
            results.query,
            found.query_vector if found is not None else None,
            [(hit.chunk_id, hit.score) for hit in results],
            results.scope,
            session_id=None,
            filters=filters,
            agreed=agreed(found) if found is not None else None,
        )
        return {candidate.hit.chunk_id: candidate.relevance for candidate in judged}

    def question_terms(
        self,
        question: str,
        scope: Scope,
        filters: Filters | None,
        *,
        candidate_texts: Sequence[str] = (),
    ) -> QuestionTerms:
        """The question's weighted terms in ``scope``, with its distinctive terms (codes,
        rare words) that the scope lacks. A rare word one typing slip away from a word
        of ``candidate_texts`` (the passages found for it) is taken as misspelt, not
        absent, one that begins a longer word of them as clipped, one that shortens words
        that follow each other there as abbreviated, an acronym that begins a compound
        name there (``CRLF`` of ``crlfDelay``) as named; a placeholder name
        (``tool::something``) as an example, not a name; and a term only the statements
        around the question sentences name (its premise) as the asker's situation."""
        language = self.settings.rag.language
        english = language == DEFAULT_LANGUAGE and bool(self.common_words)
        absence = self.common_words.absence_weight if english else None
        own = own_names(question) | own_files(question, self.common_words)
        codes = question_codes(
            question, absence, own, self.common_words.is_common if english else None
        )
        numbers = number_terms(question)
        lookups = [
            *search_terms(question, language),
            *codes,
            *(c for cores in codes.values() for c in cores),
            *(s for spellings in numbers.values() for s in spellings),
        ]
        stats = self.store.term_statistics(lookups, scope, filters, self.searcher.exclusions())

        own_words = with_parts(own)  # the user's own names say nothing, nor their words

        def said_by_absence(word: str) -> float:
            return 0.0 if word.lower() in own_words else absence(word) if absence else 1.0

        terms = question_terms(question, stats, language, said_by_absence if own else absence)
        absent = [
            code
            for code in held_nowhere(codes, numbers, stats.in_scope)
            if not leads_a_name(code, candidate_texts)
        ]
        rare = self.rare_words_absent(
            terms.absent, scope, filters, proper_names(question) if english else set()
        )
        absent += [w for w in rare if not _named_otherwise(w, own_words, candidate_texts)]
        asked = asked_sentence(question)
        if asked is not None:  # names only the premise gives are the asker's situation
            absent = [w for w in absent if writes(asked, w)]
        return replace(terms, distinctive_absent=tuple(dict.fromkeys(absent)))

    def rare_words_absent(
        self,
        absent: Sequence[str],
        scope: Scope,
        filters: Filters | None,
        names: set[str] = frozenset(),  # type: ignore[assignment]
    ) -> list[str]:
        """The rare words among ``absent`` (question words the scope lacks), and the
        everyday words the question writes as ``names``, that the scope lacks in every
        inflected form too: the index matches whole words, so "detach" is absent from a
        scope that says "detached"."""
        rare = self.common_words.rare(absent)
        rare += [w for w in absent if w.lower() in names and w not in rare]
        if not rare:
            return []
        forms = {word: word_forms(word) for word in rare}
        stats = self.store.term_statistics(
            sorted({f for group in forms.values() for f in group}),
            scope,
            filters,
            self.searcher.exclusions(),
        )
        return [w for w, group in forms.items() if not any(stats.in_scope.get(f) for f in group)]

    def closer_elsewhere(
        self,
        question: str,
        scope: Scope,
        ranked: list[Candidate],
        *,
        vectors: bool,
        session_id: str | None,
        filters: Filters | None,
    ) -> tuple[Closer | None, dict[str, Any] | None]:
        """The wider scope the guidance would suggest, when a document there answers the
        question clearly better than anything in scope (else ``None``), and what was
        compared (``None`` when there is no wider scope)."""
        rag = self.settings.rag
        wider = self.wider_scope(scope)
        if wider is None:
            return None, None
        found = self.searcher.candidates(
            question,
            wider,
            mode="hybrid",
            lexical_depth=rag.lexical_depth,
            vector_depth=rag.k_vector,
            filters=filters,
            exclusions=self.searcher.exclusions(),
            parallel=True,
        )
        here = {c.hit.document_id for c in ranked}
        inside = set(self.store.scope_document_ids(scope))
        outside, _ = self.candidates(
            question,
            found.query_vector if vectors else None,
            found.fused[: rag.rerank_top_n],
            wider,
            session_id=session_id,
            filters=filters,
            agreed=agreed(found),
        )
        outside = [c for c in outside if c.hit.document_id not in inside | here]
        best_here = max(c.relevance for c in ranked)
        best_there = max((c.relevance for c in outside), default=0.0)
        compared = {
            "scope": wider.to_dict(),
            "best_outside_scope": round(best_there, 4),
            "best_in_scope": round(best_here, 4),
            "margin": rag.wider_scope_margin,
        }
        if best_there < best_here + (rag.wider_scope_margin or 0.0):
            return None, compared
        where = "the workspace" if wider.kind == "workspace" else "the global library"
        return Closer(wider.kind, where, best_there, best_here), compared

    def wider_scope(self, scope: Scope) -> Scope | None:
        """The scope the guidance suggests after ``scope``, when there is one."""
        return wider_scope(self.store, scope)

    def guidance(
        self, scope: Scope, found: int, closer: Closer | None = None
    ) -> tuple[str, ScopeKind | None]:
        """What to tell the caller when nothing in ``scope`` grounds the question
        (:func:`~tether.retrieve.guidance.guidance`), and the wider scope to suggest: one
        that holds a closer match, else the next wider one when it holds a document
        ``scope`` does not (else searching it could find nothing new)."""
        inside = set(self.store.scope_document_ids(scope))
        more = closer is not None or holds_more(self.store, scope, inside)
        return guidance(
            scope,
            has_documents=bool(inside),
            found=found,
            closer=closer.kind if closer else None,
            wider_holds_more=more,
        )


def _named_otherwise(word: str, own_words: set[str], texts: Sequence[str]) -> bool:
    """Whether a rare word the scope lacks says nothing of it: a placeholder, a word of
    the asker's own names, or a short form of a word of ``texts`` (misspelt, clipped,
    abbreviated)."""
    return (
        placeholder(word)
        or word.lower() in own_words
        or misspelt(word, texts)
        or clipped(word, texts)
        or abbreviated(word, texts)
    )


def question_codes(
    question: str,
    absence: Callable[[str], float] | None,
    own: set[str],
    is_word: Callable[[str], bool] | None = None,
) -> dict[str, list[str]]:
    """The names a question asks about that a scope must hold, each with the parts or
    spellings that hold it too (see :mod:`tether.retrieve.distinctive`): its codes, the
    commands it calls commands, and the hyphenated names it writes as names. Placeholder
    names and the names it gives its own things (``own``, in lower case) are examples,
    and a word in capitals that is an everyday word (``absence`` weight under one half)
    may be emphasis ("does it NOT start?"). A word in capitals is held where the scope
    writes it with a capital when it is a keyword that is also a word of the vocabulary
    (``is_word``: "merge" in prose is no ``MERGE`` statement), in any case when it is an
    acronym (``HTTP`` by "http requests", ``JSON`` by "json"), and in any case without a
    vocabulary."""
    codes = {
        code: code_cores(code) or _any_case(code, is_word)
        for code in code_terms(question)
        if not (absence and code.isalpha() and code.isupper() and absence(code) < 0.5)
        and not placeholder(code)
        and code.lower() not in own
    }
    codes |= {command: [] for command in command_terms(question) if not placeholder(command)}
    codes |= {
        name: joined
        for name, joined in compound_names(question).items()
        if name not in codes and not placeholder(name)
    }
    return codes


def held_nowhere(
    codes: dict[str, list[str]], numbers: dict[str, list[str]], in_scope: dict[str, bool]
) -> list[str]:
    """The codes and named numbers of a question that the scope holds in no way: a code
    neither whole nor by all of its parts, a number in none of its spellings."""
    absent = [
        code
        for code, cores in codes.items()
        if not in_scope.get(code, False) and not (cores and all(in_scope.get(c) for c in cores))
    ]
    return absent + [
        n for n, spellings in numbers.items() if not any(in_scope.get(s) for s in spellings)
    ]


#: Letters of the shortest keyword in capitals that must be written so: shorter ones are
#: acronyms, which text writes in lower case as often ("http requests", "json output").
KEYWORD_LETTERS = 5


def _any_case(code: str, is_word: Callable[[str], bool] | None) -> list[str]:
    """``[code]`` in lower case for a word in capitals that names nothing else: an acronym
    (under :data:`KEYWORD_LETTERS` letters), no word of the vocabulary, or no vocabulary
    to ask. The scope holds it in any case; else nothing."""
    keyword = len(code) >= KEYWORD_LETTERS and is_word is not None and is_word(code)
    return [code.lower()] if capitals(code) and not keyword else []


def wider_scope(store: Store, scope: Scope) -> Scope | None:
    """The scope after ``scope`` (a session's workspace, a workspace's global library),
    when there is one."""
    if scope.kind == "session":
        session = store.find_session(scope.id)
        return Scope.workspace(session.workspace_id) if session else None
    if scope.kind == "workspace" and scope.id != Scope.global_().id:
        return Scope.global_()
    return None


def holds_more(store: Store, scope: Scope, inside: set[str] | None = None) -> bool:
    """Whether the scope after ``scope`` holds a document ``scope`` does not see
    (``inside``: the ids of those it does, when known)."""
    wider = wider_scope(store, scope)
    if wider is None:
        return False
    seen = set(store.scope_document_ids(scope)) if inside is None else inside
    return any(d not in seen for d in store.scope_document_ids(wider))
