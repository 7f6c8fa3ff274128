"""SQL built apart from its execution: pure functions of their parameters that return
``(sql, params)``, as sqlite-utils' ``search_sql()`` does; the store's methods run them.

Every value is a bound parameter; only identifiers this module chooses itself (column
names, placeholders) are written into the text. The scope of a read is always part of
the statement: :func:`scope_sql` is the one predicate for "what a scope may see", used by
the lexical search and by the scope's document set alike.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from tether.models import GLOBAL_WORKSPACE, Exclusions, Filters, Scope
from tether.store._paths import stored_path
from tether.store._rows import AUDIT_COLUMNS, HIT_COLUMNS, REGISTRY_COLUMNS, document_columns
from tether.store.dialect import SQLITE, Dialect
from tether.store.records import RegistryEntry
from tether.text import DEFAULT_LANGUAGE, capitals, stemmed_text

# bm25 column weights for (content, section_title).
FTS_COLUMN_WEIGHTS = (1.0, 1.0)
_PHRASE = re.compile(r'"((?:[^"]|"")*)"')

#: The registry fields a caller may set (the path is the key).
REGISTRY_FIELDS = frozenset(RegistryEntry.__dataclass_fields__) - {"source_path"}

DocumentColumn = Literal["c.document_id", "d.id"]

# -- the scope predicate ---------------------------------------------------------------


def scope_sql(
    scope: Scope,
    filters: Filters | None = None,
    exclusions: Exclusions | None = None,
    *,
    document_column: DocumentColumn = "c.document_id",
    dialect: Dialect = SQLITE,
) -> tuple[str, dict[str, Any]]:
    """The WHERE fragment for what ``scope`` may see under its tag filters and the
    policy's exclusions: active documents only. ``d`` is rag_documents; the document id
    is read from ``document_column`` (``c.document_id`` when the statement selects
    chunks ``c``, ``d.id`` when it selects documents); spelled for ``dialect``."""
    if document_column not in ("c.document_id", "d.id"):
        raise ValueError(f"unknown document column {document_column!r}")
    params: dict[str, Any] = {"scope_id": scope.id}
    clauses = ["d.status = 'active'", _scope_clause(scope, document_column)]
    if filters is not None:
        clauses += _filter_clauses(filters, params)
    if exclusions is not None:
        clauses += _exclusion_clauses(exclusions, params, dialect)
    return " AND ".join(clauses), params


def _scope_clause(scope: Scope, document_column: DocumentColumn) -> str:
    if scope.kind == "session":
        return (
            f"{document_column} IN (SELECT ds.document_id FROM rag_document_sessions ds"
            " WHERE ds.session_id = :scope_id)"
        )
    return "d.workspace_id = :scope_id"  # workspace and global: GLOBAL is a workspace


def _filter_clauses(filters: Filters, params: dict[str, Any]) -> list[str]:
    clauses = []
    for column, values in (
        ("domain", filters.domains),
        ("project_id", filters.project_ids),
        ("source_type", filters.source_types),
        ("id", filters.document_ids),
    ):
        if values is None:
            continue
        names = []
        for i, value in enumerate(v for v in values if v is not None):
            params[f"f_{column}_{i}"] = value
            names.append(f":f_{column}_{i}")
        parts = [f"d.{column} IN ({', '.join(names)})"] if names else []
        if None in values:
            parts.append(f"d.{column} IS NULL")
        clauses.append("(" + " OR ".join(parts) + ")")
    return clauses


def _exclusion_clauses(
    exclusions: Exclusions, params: dict[str, Any], dialect: Dialect
) -> list[str]:
    clauses = []
    distinct_from = dialect.distinct_from
    if exclusions.log_cutoff is not None:
        params["log_cutoff"] = exclusions.log_cutoff
        # NULL-safe throughout: an untagged document is never excluded by accident.
        clauses.append(
            f"(d.source_type {distinct_from} 'log'"
            " OR coalesce(d.last_verified, d.indexed_at, d.created_at) >= :log_cutoff)"
        )
    if exclusions.unverified_urls:
        clauses.append(
            f"(d.last_verified IS NOT NULL OR (d.source_type {distinct_from} 'link'"
            " AND lower(coalesce(d.source_path, '')) NOT LIKE 'http://%'"
            " AND lower(coalesce(d.source_path, '')) NOT LIKE 'https://%'))"
        )
    return clauses


# -- scoped reads ----------------------------------------------------------------------


def lexical_search_sql(
    scope: Scope,
    match: str,
    k: int,
    *,
    ids_only: bool = False,
    filters: Filters | None = None,
    exclusions: Exclusions | None = None,
    depth: int | None = None,
    count_ranked: bool = False,
) -> tuple[str, dict[str, Any]]:
    """SQL for an FTS5 bm25 search of ``match`` (already compiled, safe FTS5) inside ``scope``.

    Rows are the hit columns then the bm25 rank score (lower is better); with
    ``ids_only``, just the chunk id and that score (a deep candidate list is cheap).

    bm25 is the expensive part (every match is scored before the top ``k`` is cut), so
    the statement scores only what it must, in one of two plans; both hold the scope in
    their WHERE clause and give the same rows:

    - **scope first** (``depth`` None): the scope's chunk ids are selected once and each
      match is tested against that set before it is scored; the joins for the hit columns
      run for the top ``k`` only. Right for a scope that holds a small part of the store.
    - **rank first** (``depth``): the best ``depth`` matches of the whole index are
      ranked (bm25 does not depend on the scope, so the in-scope ones among them are the
      scope's best, in order) and the scope is applied to them. When fewer than ``k`` rows
      come back the scope may hold more matches further down: run the scope-first plan
      (:meth:`~tether.store.sqlite.SQLiteStore.search_lexical` does). Right for a scope
      that holds most of the store, where testing each match costs more than it saves.
      With ``count_ranked``, each row ends with how many matches were ranked: fewer than
      ``depth`` means the whole index was, and the rows are all the scope's matches.
    """
    where, params = scope_sql(scope, filters, exclusions)
    w_content, w_section = (float(w) for w in FTS_COLUMN_WEIGHTS)
    score = f"bm25(rag_chunks_fts, {w_content!r}, {w_section!r})"
    columns = "c.id" if ids_only else HIT_COLUMNS
    ranked = _ranked_matches(score, where, scope_first=depth is None)
    scoped = "" if depth is None else f"WHERE {where}"
    if depth is not None:
        params["depth"] = int(depth)
    if count_ranked and depth is not None:
        columns += ", ranked.rank_score, (SELECT count(*) FROM ranked)"
    else:
        columns += ", ranked.rank_score"
    sql = f"""
        WITH ranked AS MATERIALIZED ({ranked})
        SELECT {columns}
        FROM ranked
        JOIN rag_chunks c ON c.id = ranked.id
        JOIN rag_documents d ON d.id = c.document_id
        {scoped}
        ORDER BY ranked.rank_score, c.id
        LIMIT :k
    """
    return sql, {**params, "match": match, "k": int(k)}


def _ranked_matches(score: str, where: str, *, scope_first: bool) -> str:
    """The ranked matches of :func:`lexical_search_sql`'s two plans: the scope's best
    ``:k`` (each match tested against the scope's chunk ids before it is scored), or the
    whole index's best ``:depth`` (the scope applied after)."""
    if scope_first:
        # ``+rowid``: the set is a filter on each match, not a lookup per chunk id.
        return f"""
            SELECT rowid AS id, {score} AS rank_score
            FROM rag_chunks_fts
            WHERE rag_chunks_fts MATCH :match
              AND +rowid IN (
                SELECT c.id FROM rag_chunks c
                JOIN rag_documents d ON d.id = c.document_id
                WHERE {where})
            ORDER BY rank_score, rowid
            LIMIT :k"""
    return f"""
        SELECT rowid AS id, {score} AS rank_score
        FROM rag_chunks_fts
        WHERE rag_chunks_fts MATCH :match
        ORDER BY rank_score, rowid
        LIMIT :depth"""


def scope_chunk_count_sql(
    scope: Scope,
    filters: Filters | None = None,
    exclusions: Exclusions | None = None,
    *,
    dialect: Dialect = SQLITE,
) -> tuple[str, dict[str, Any]]:
    """SQL for ``(chunks in scope, chunks in the store)``: which lexical plan fits."""
    where, params = scope_sql(scope, filters, exclusions, dialect=dialect)
    sql = f"""
        SELECT (SELECT count(*) FROM rag_chunks c
                JOIN rag_documents d ON d.id = c.document_id WHERE {where}),
               (SELECT count(*) FROM rag_chunks)
    """
    return sql, params


def match_scores_sql(
    match: str, among: Sequence[int] | None = None
) -> tuple[str, dict[str, Any] | list[Any]]:
    """SQL for ``(chunk id, bm25)`` of every chunk of the store that ``match`` matches,
    or of those ``among`` these ids (FTS5 looks each id up: cheaper than scoring every
    match for a few ids, dearer for hundreds)."""
    w_content, w_section = (float(w) for w in FTS_COLUMN_WEIGHTS)
    sql = (
        f"SELECT rowid, bm25(rag_chunks_fts, {w_content!r}, {w_section!r})"
        " FROM rag_chunks_fts WHERE rag_chunks_fts MATCH ?"
    )
    if among is None:
        return sql, [match]
    return f"{sql} AND rowid IN ({_placeholders(len(among))})", [match, *among]


def match_terms(match: str) -> list[str]:
    """The terms of a compiled FTS5 expression (``"a" OR "b"``, as
    :func:`tether.retrieve.fts.compile_match` writes it)."""
    return [m.replace('""', '"') for m in _PHRASE.findall(match)]


def fts_phrase(term: str) -> str:
    """``term`` as one quoted FTS5 string: whatever it holds is matched as text."""
    return '"' + term.replace('"', '""') + '"'


def indexed_term(term: str, language: str) -> str:
    """``term`` as the full-text index of a SQLite store of ``language`` holds it: as it
    is in English (FTS5's porter tokenizer stems it as it stemmed the text), else its
    Snowball stems (:func:`~tether.text.stemmed_text`, as the text was stemmed)."""
    if language == DEFAULT_LANGUAGE:
        return term
    return stemmed_text(term, language) or term


def indexed_match(match: str, language: str) -> str:
    """A compiled expression (:func:`match_terms`) with each term as the index of a
    SQLite store of ``language`` holds it (:func:`indexed_term`)."""
    if language == DEFAULT_LANGUAGE:
        return match
    return " OR ".join(fts_phrase(indexed_term(t, language)) for t in match_terms(match))


def term_frequency_sql(term: str) -> tuple[str, dict[str, Any]]:
    """SQL for the number of chunks of the whole store that hold ``term``."""
    sql = "SELECT count(*) FROM rag_chunks_fts WHERE rag_chunks_fts MATCH :match"
    return sql, {"match": fts_phrase(term)}


def term_count_upto_sql(term: str, cap: int) -> tuple[str, dict[str, Any]]:
    """SQL for the number of chunks of the store that hold ``term``, counted up to ``cap``
    (a common term's count stops there instead of reading its whole posting list)."""
    sql = (
        "SELECT count(*) FROM (SELECT 1 FROM rag_chunks_fts"
        " WHERE rag_chunks_fts MATCH :match LIMIT :cap)"
    )
    return sql, {"match": fts_phrase(term), "cap": int(cap)}


#: The dashes an option may be printed with: typeset text and word processors turn "--"
#: into an en or em dash, PDF text into a minus sign or a hyphen of its own.
_DASHES = ("-", "\u2010", "\u2011", "\u2013", "\u2014", "\u2212")


def option_literals(term: str) -> list[str]:
    """For a command-line option (``--ipv4``, ``-w``), the texts a chunk that names it
    holds, lower-cased: its name after any dash (the full-text index drops the dashes,
    and would find "--ipv4" in any chunk saying "IPv4"); none for any other term. A long
    option's name follows two ASCII hyphens, or one typeset dash: "--include-ignored"
    does not name ``--ignored``."""
    name = term.lstrip("-").lower()
    if not term.startswith("-") or not name:
        return []
    if term.startswith("--"):
        return ["--" + name, *(dash + name for dash in _DASHES if dash != "-")]
    return [dash + name for dash in _DASHES]


def option_condition(term: str, dialect: Dialect = SQLITE) -> tuple[str, dict[str, Any]]:
    """A condition on ``c.content`` that holds when the chunk names ``term`` as it is
    written, with its parameters: the option ``term`` (:func:`option_literals`), or the
    word in capitals ``term`` (:func:`~tether.text.capitals`) in capitals or capitalized,
    where the full-text index matches any case ("merge" in a chunk does not name the
    keyword ``MERGE``); ``("1 = 1", {})`` for other terms."""
    if capitals(term):
        params = {"capitals": term, "capitalized": term.capitalize()}
        found = (f"{dialect.position('c.content', ':' + name)} > 0" for name in params)
        return f"({' OR '.join(found)})", params
    literals = option_literals(term)
    if not literals:
        return "1 = 1", {}
    params = {f"option{i}": literal for i, literal in enumerate(literals)}
    found = (f"{dialect.position('lower(c.content)', ':' + name)} > 0" for name in params)
    condition = " OR ".join(found)
    return f"({condition})", params


def term_in_scope_sql(
    scope: Scope,
    term: str,
    *,
    filters: Filters | None = None,
    exclusions: Exclusions | None = None,
    dialect: Dialect = SQLITE,
    option: str | None = None,
) -> tuple[str, dict[str, Any]]:
    """SQL whose one row says whether any chunk ``scope`` may see holds ``term`` (and, for
    an ``option`` such as ``--ipv4`` or a word in capitals such as ``MERGE`` whose indexed
    form ``term`` is, names it as written: :func:`option_condition`)."""
    where, params = scope_sql(scope, filters, exclusions, dialect=dialect)
    named, option_params = option_condition(option or "", dialect)
    sql = f"""
        SELECT EXISTS (
            SELECT 1 FROM rag_chunks_fts
            JOIN rag_chunks c ON c.id = rag_chunks_fts.rowid
            JOIN rag_documents d ON d.id = c.document_id
            WHERE rag_chunks_fts MATCH :match AND {where} AND {named}
        )
    """
    return sql, {**params, **option_params, "match": fts_phrase(term)}


def scope_documents_sql(
    scope: Scope,
    filters: Filters | None = None,
    exclusions: Exclusions | None = None,
    among: Sequence[str] | None = None,
) -> tuple[str, dict[str, Any]]:
    """SQL for the ids of the documents ``scope`` may see: the predicate of every search;
    with ``among``, of those documents only (looked up by id, one by one)."""
    where, params = scope_sql(scope, filters, exclusions, document_column="d.id")
    if among is None:
        return f"SELECT d.id FROM rag_documents d WHERE {where}", params
    params["among"] = json.dumps(list(among))
    return (
        "SELECT d.id FROM json_each(:among) j CROSS JOIN rag_documents d ON d.id = j.value"
        f" WHERE {where}",
        params,
    )


# -- reads by id -----------------------------------------------------------------------


def _placeholders(count: int) -> str:
    return ",".join("?" * count)


def _among(column: str, values: Sequence[Any]) -> str:
    """``column IN (?, ...)`` for ``values``; a condition no row meets for none (an empty
    ``IN ()`` is SQLite's extension, not SQL)."""
    return f"{column} IN ({_placeholders(len(values))})" if values else "1 = 0"


def hits_sql(chunk_ids: Sequence[int]) -> tuple[str, list[Any]]:
    """SQL for the hit columns of ``chunk_ids`` (keep a batch under SQLite's 999 variables)."""
    sql = (
        f"SELECT {HIT_COLUMNS} FROM rag_chunks c JOIN rag_documents d ON d.id = c.document_id"
        f" WHERE c.id IN ({_placeholders(len(chunk_ids))})"
    )
    return sql, list(chunk_ids)


def document_chunks_sql(
    scope: Scope,
    *,
    page: int | None = None,
    first: int | None = None,
    limit: int = 50,
    filters: Filters | None = None,
    exclusions: Exclusions | None = None,
    dialect: Dialect = SQLITE,
) -> tuple[str, dict[str, Any]]:
    """SQL for the ids of chunks that a request about a document itself wants, inside
    ``scope``: those on ``page`` (the page whose printed label is that number, in a
    document that has one; else the physical page), or the ``first`` chunks of each
    document (its opening). Newest document first, then reading order."""
    where, params = scope_sql(scope, filters, exclusions, dialect=dialect)
    if page is not None:
        where += (
            " AND c.page = coalesce((SELECT l.page FROM rag_chunks l"
            " WHERE l.document_id = c.document_id AND l.page_label = :page_label"
            " ORDER BY l.ordinal LIMIT 1), :page)"
        )
        params["page"] = int(page)
        params["page_label"] = str(int(page))
    if first is not None:
        where += " AND c.ordinal < :first"
        params["first"] = int(first)
    sql = (
        "SELECT c.id FROM rag_chunks c JOIN rag_documents d ON d.id = c.document_id"
        f" WHERE {where}"
        " ORDER BY coalesce(d.indexed_at, d.created_at) DESC, c.document_id, c.ordinal"
        " LIMIT :limit"
    )
    return sql, {**params, "limit": int(limit)}


def candidate_rows_sql(
    chunk_ids: Sequence[int], session_id: str | None = None
) -> tuple[str, list[Any]]:
    """SQL for the hit columns of ``chunk_ids`` then token count, document metadata,
    recency (when the document joined ``session_id``; without one, when it was indexed)
    and source type."""
    if session_id is None:
        recency, join, params = "d.indexed_at", "", []
    else:
        recency = "ds.created_at"
        join = " LEFT JOIN rag_document_sessions ds ON ds.document_id = d.id AND ds.session_id = ?"
        params = [session_id]
    sql = (
        f"SELECT {HIT_COLUMNS}, c.token_count, d.metadata, {recency}, d.source_type"
        f" FROM rag_chunks c JOIN rag_documents d ON d.id = c.document_id{join}"
        f" WHERE c.id IN ({_placeholders(len(chunk_ids))})"
    )
    return sql, [*params, *chunk_ids]


def vectors_for_hashes_sql(model: str, hashes: Sequence[str]) -> tuple[str, list[Any]]:
    """SQL for ``(content_hash, dims, vector)`` of the chunks with ``hashes`` embedded by
    ``model``.

    ``CROSS JOIN`` fixes the join order whatever the statistics say (a store is never
    ANALYZEd): the hashes are looked up in their index, then each chunk's vector by its
    key. Left to itself the planner read every vector of the model instead (35 ms of a
    38 ms add at 100k chunks)."""
    sql = (
        "SELECT c.content_hash, e.dims, e.vector FROM rag_chunks c"
        " CROSS JOIN rag_embeddings e ON e.chunk_id = c.id AND e.model = ?"
        f" WHERE c.content_hash IN ({_placeholders(len(hashes))})"
    )
    return sql, [model, *hashes]


# -- listings --------------------------------------------------------------------------


def find_document_sql(
    *,
    workspace_id: str,
    document_id: str | None = None,
    source_path: str | None = None,
    content_hash: str | None = None,
    dialect: Dialect = SQLITE,
) -> tuple[str, list[Any]] | None:
    """SQL for the document a new source would update: by id, else by path, else (for
    text without a path) by identical content in the workspace; None without any key."""
    if document_id is not None:
        where, params = "d.id = ?", [document_id]
    elif source_path is not None:
        where = "d.workspace_id = ? AND d.source_path = ?"
        params = [workspace_id, stored_path(source_path)]
    elif content_hash is not None:
        where = "d.workspace_id = ? AND d.source_path IS NULL AND d.content_hash = ?"
        params = [workspace_id, content_hash]
    else:
        return None
    sql = f"SELECT {document_columns(dialect)} FROM rag_documents d WHERE {where}"
    return sql + " ORDER BY d.created_at LIMIT 1", params


def find_documents_sql(
    key: str, values: Sequence[str], workspace_id: str | None, dialect: Dialect = SQLITE
) -> tuple[str, list[Any]]:
    """SQL for the documents :func:`find_document_sql` would find for many sources that
    share one kind of key (``"id"``, ``"source"`` or ``"content"``; the last two in
    ``workspace_id``), oldest first: the first row for each key is its document."""
    marks = ", ".join("?" * len(values))
    if key == "id":
        where, params = f"d.id IN ({marks})", list(values)
    elif key == "source":
        where = f"d.workspace_id = ? AND d.source_path IN ({marks})"
        params = [workspace_id, *(stored_path(v) for v in values)]
    elif key == "content":
        where = f"d.workspace_id = ? AND d.source_path IS NULL AND d.content_hash IN ({marks})"
        params = [workspace_id, *values]
    else:
        raise ValueError(f"unknown document key {key!r}")
    sql = f"SELECT {document_columns(dialect)} FROM rag_documents d WHERE {where}"
    return sql + " ORDER BY d.created_at", params


def list_documents_sql(
    *,
    workspace_id: str | None = None,
    session_id: str | None = None,
    dialect: Dialect = SQLITE,
) -> tuple[str, list[Any]]:
    """SQL for the documents of a workspace and/or attached to a session (else all)."""
    clauses, params = [], []
    if workspace_id is not None:
        clauses.append("d.workspace_id = ?")
        params.append(workspace_id)
    if session_id is not None:
        clauses.append(
            "d.id IN (SELECT document_id FROM rag_document_sessions WHERE session_id = ?)"
        )
        params.append(session_id)
    where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
    sql = f"SELECT {document_columns(dialect)} FROM rag_documents d{where}"
    return sql + " ORDER BY d.workspace_id, d.title, d.id", params


def list_sessions_sql(workspace_id: str | None = None) -> tuple[str, list[Any]]:
    """SQL for the sessions (of ``workspace_id``, if given), oldest first."""
    sql = "SELECT id, workspace_id, created_at, closed_at FROM sessions"
    params: list[Any] = []
    if workspace_id is not None:
        sql += " WHERE workspace_id = ?"
        params = [workspace_id]
    return sql + " ORDER BY created_at", params


# -- the library registry and the audit log --------------------------------------------


def registry_sql(under: str | None = None) -> tuple[str, list[Any]]:
    """SQL for the registry rows (of paths under the folder ``under``, if given), by path."""
    sql = f"SELECT {REGISTRY_COLUMNS} FROM rag_index_registry"
    params: list[Any] = []
    if under is not None:
        prefix = stored_path(under.rstrip("/") + "/") or ""
        sql += " WHERE substr(source_path, 1, ?) = ?"
        params = [len(prefix), prefix]
    return sql + " ORDER BY source_path", params


def upsert_registry_sql(source_path: str, fields: Mapping[str, Any]) -> tuple[str, list[Any]]:
    """SQL that creates the registry row of ``source_path`` with ``fields`` (status
    ``queued`` unless given) or updates just ``fields`` of the existing row."""
    unknown = set(fields) - REGISTRY_FIELDS
    if unknown:
        raise ValueError(f"unknown registry fields {sorted(unknown)}")
    # Nothing to update: the row is left as it is (set to itself, named by its table).
    updates = ", ".join(f"{c} = excluded.{c}" for c in fields)
    updates = updates or "status = rag_index_registry.status"
    inserted = {"status": "queued", **fields}  # a new row needs a status
    columns = ["source_path", *inserted]
    sql = (
        f"INSERT INTO rag_index_registry ({', '.join(columns)})"
        f" VALUES ({_placeholders(len(columns))})"
        f" ON CONFLICT (source_path) DO UPDATE SET {updates}"
    )
    return sql, [stored_path(source_path), *inserted.values()]


def retrieval_log_sql(
    limit: int = 50,
    outcome: str | None = None,
    *,
    workspace_ids: Sequence[str] | None = None,
    retrieval_id: str | None = None,
    since: str | None = None,
    until: str | None = None,
    global_askers: Sequence[str] | None = None,
) -> tuple[str, list[Any]]:
    """SQL for the newest ``limit`` audit rows (with ``outcome``, of scopes in
    ``workspace_ids`` or global ones asked by ``global_askers``, with ``retrieval_id``,
    at or after ``since`` and before ``until`` (stored timestamps' ISO form, which sorts
    as text): each if given), newest first."""
    clauses: list[str] = []
    params: list[Any] = []
    if outcome:
        clauses.append("outcome = ?")
        params.append(outcome)
    if workspace_ids is not None or global_askers is not None:
        workspaces, askers = list(workspace_ids or ()), list(global_askers or ())
        clauses.append(
            f"({_among('workspace_id', workspaces)}"
            f" OR (workspace_id = ? AND {_among('asked_by', askers)}))"
        )
        params += [*workspaces, GLOBAL_WORKSPACE, *askers]
    if retrieval_id is not None:
        clauses.append("retrieval_id = ?")
        params.append(retrieval_id)
    if since is not None:
        clauses.append("created_at >= ?")
        params.append(since)
    if until is not None:
        clauses.append("created_at < ?")
        params.append(until)
    where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
    sql = f"SELECT {AUDIT_COLUMNS} FROM rag_retrieval_log{where} ORDER BY id DESC LIMIT ?"
    return sql, [*params, limit]
