"""Numbered, named schema migrations. ``PRAGMA user_version`` records the last one applied.

Never edit a migration that has shipped: add the next one. Each runs in its own
``BEGIN IMMEDIATE`` transaction together with the ``user_version`` bump.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tether.text import DEFAULT_LANGUAGE, check_language

#: The SQL function that stems text for a store of a language other than English
#: (:func:`tether.text.stemmed_text`); every connection registers it.
STEMMED_TEXT = "tether_stemmed_text"


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str
    #: The SQL for a store of another language than English, when it differs.
    for_language: Callable[[str], str] | None = None

    def sql_for(self, language: str) -> str:
        if self.for_language is None or language == DEFAULT_LANGUAGE:
            return self.sql
        return self.for_language(language)


_0001_core = """
CREATE TABLE workspaces (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    created_at  TEXT NOT NULL
);

INSERT INTO workspaces (id, name, created_at)
VALUES ('GLOBAL', 'Global library', strftime('%Y-%m-%dT%H:%M:%fZ', 'now'));

CREATE TABLE sessions (
    id            TEXT PRIMARY KEY,
    workspace_id  TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    created_at    TEXT NOT NULL,
    closed_at     TEXT
);
CREATE INDEX sessions_workspace ON sessions(workspace_id);

CREATE TABLE rag_documents (
    id             TEXT PRIMARY KEY,
    workspace_id   TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    title          TEXT NOT NULL,
    source_path    TEXT,
    source_type    TEXT,
    mime           TEXT NOT NULL,
    content_hash   TEXT NOT NULL,
    file_size      INTEGER,
    project_id     TEXT,
    domain         TEXT,
    version        TEXT,
    last_verified  TEXT,
    status         TEXT NOT NULL DEFAULT 'active',
    created_at     TEXT NOT NULL,
    indexed_at     TEXT,
    stale_at       TEXT,
    metadata       TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(metadata))
);
-- A file is one document per workspace; re-adding it updates that document.
CREATE UNIQUE INDEX rag_documents_source
    ON rag_documents(workspace_id, source_path) WHERE source_path IS NOT NULL;
CREATE INDEX rag_documents_workspace ON rag_documents(workspace_id, status);
CREATE INDEX rag_documents_hash ON rag_documents(workspace_id, content_hash);

CREATE TABLE rag_document_sessions (
    document_id  TEXT NOT NULL REFERENCES rag_documents(id) ON DELETE CASCADE,
    session_id   TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    created_at   TEXT NOT NULL,
    PRIMARY KEY (session_id, document_id)
) WITHOUT ROWID;
CREATE INDEX rag_document_sessions_document ON rag_document_sessions(document_id);

CREATE TABLE rag_chunks (
    id             INTEGER PRIMARY KEY,
    document_id    TEXT NOT NULL REFERENCES rag_documents(id) ON DELETE CASCADE,
    ordinal        INTEGER NOT NULL,
    content        TEXT NOT NULL,
    section_title  TEXT,
    token_count    INTEGER,
    char_start     INTEGER NOT NULL,
    char_end       INTEGER NOT NULL,
    page           INTEGER,
    content_hash   TEXT NOT NULL,
    UNIQUE (document_id, ordinal),
    CHECK (char_start >= 0 AND char_end >= char_start)
);
CREATE INDEX rag_chunks_hash ON rag_chunks(content_hash);

-- External-content FTS5 index over rag_chunks. The triggers below keep it in step in the
-- same transaction as every chunk write, cascade deletes included.
CREATE VIRTUAL TABLE rag_chunks_fts USING fts5(
    content,
    section_title,
    content = 'rag_chunks',
    content_rowid = 'id',
    tokenize = 'porter unicode61 remove_diacritics 2'
);

CREATE TRIGGER rag_chunks_fts_insert AFTER INSERT ON rag_chunks BEGIN
    INSERT INTO rag_chunks_fts (rowid, content, section_title)
    VALUES (new.id, new.content, new.section_title);
END;

CREATE TRIGGER rag_chunks_fts_delete AFTER DELETE ON rag_chunks BEGIN
    INSERT INTO rag_chunks_fts (rag_chunks_fts, rowid, content, section_title)
    VALUES ('delete', old.id, old.content, old.section_title);
END;

CREATE TRIGGER rag_chunks_fts_update AFTER UPDATE OF content, section_title ON rag_chunks BEGIN
    INSERT INTO rag_chunks_fts (rag_chunks_fts, rowid, content, section_title)
    VALUES ('delete', old.id, old.content, old.section_title);
    INSERT INTO rag_chunks_fts (rowid, content, section_title)
    VALUES (new.id, new.content, new.section_title);
END;
"""

_0002_embeddings_registry_audit = """
-- A rowid table on purpose: WITHOUT ROWID suits small rows, and a 1.5 kB vector in one
-- spills into overflow pages that leave most of each page empty (2.9x the file size).
CREATE TABLE rag_embeddings (
    chunk_id  INTEGER NOT NULL REFERENCES rag_chunks(id) ON DELETE CASCADE,
    model     TEXT NOT NULL,
    dims      INTEGER NOT NULL CHECK (dims > 0),
    vector    BLOB NOT NULL,
    PRIMARY KEY (model, chunk_id),
    CHECK (length(vector) = 4 * dims)
);
CREATE INDEX rag_embeddings_chunk ON rag_embeddings(chunk_id);

CREATE TABLE rag_index_registry (
    source_path      TEXT PRIMARY KEY,
    content_hash     TEXT,
    status           TEXT NOT NULL,
    retry_count      INTEGER NOT NULL DEFAULT 0,
    last_seen_at     TEXT,
    last_indexed_at  TEXT,
    error            TEXT
);

-- The audit trail: ids, sanitized query, scope, outcome. Never chunk text, vectors or scores.
CREATE TABLE rag_retrieval_log (
    id          INTEGER PRIMARY KEY,
    created_at  TEXT NOT NULL,
    query       TEXT NOT NULL,
    scope       TEXT NOT NULL,
    filters     TEXT NOT NULL DEFAULT '{}',
    chunk_ids   TEXT NOT NULL DEFAULT '[]',
    outcome     TEXT NOT NULL
);
"""

_0003_change_counters = """
-- Counters that readers poll to know when an in-memory cache is stale. Triggers keep them
-- exact for every write path, FK cascades included.
CREATE TABLE rag_state (
    key    TEXT PRIMARY KEY,
    value  INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO rag_state (key, value) VALUES ('embeddings', 0), ('documents', 0);

CREATE TRIGGER rag_embeddings_changed_insert AFTER INSERT ON rag_embeddings BEGIN
    UPDATE rag_state SET value = value + 1 WHERE key = 'embeddings';
END;
CREATE TRIGGER rag_embeddings_changed_delete AFTER DELETE ON rag_embeddings BEGIN
    UPDATE rag_state SET value = value + 1 WHERE key = 'embeddings';
END;
CREATE TRIGGER rag_embeddings_changed_update AFTER UPDATE ON rag_embeddings BEGIN
    UPDATE rag_state SET value = value + 1 WHERE key = 'embeddings';
END;
CREATE TRIGGER rag_documents_changed_insert AFTER INSERT ON rag_documents BEGIN
    UPDATE rag_state SET value = value + 1 WHERE key = 'documents';
END;
CREATE TRIGGER rag_documents_changed_delete AFTER DELETE ON rag_documents BEGIN
    UPDATE rag_state SET value = value + 1 WHERE key = 'documents';
END;
CREATE TRIGGER rag_documents_changed_update AFTER UPDATE OF workspace_id, status
    ON rag_documents BEGIN
    UPDATE rag_state SET value = value + 1 WHERE key = 'documents';
END;
CREATE TRIGGER rag_document_sessions_changed_insert AFTER INSERT ON rag_document_sessions BEGIN
    UPDATE rag_state SET value = value + 1 WHERE key = 'documents';
END;
CREATE TRIGGER rag_document_sessions_changed_delete AFTER DELETE ON rag_document_sessions BEGIN
    UPDATE rag_state SET value = value + 1 WHERE key = 'documents';
END;
"""

_0004_governance = """
-- Tags are filtered in SQL like scopes; a tag change must invalidate reader caches too.
CREATE INDEX rag_documents_tags ON rag_documents(domain, source_type, project_id);
DROP TRIGGER rag_documents_changed_update;
CREATE TRIGGER rag_documents_changed_update AFTER UPDATE OF workspace_id, status, domain,
    source_type, project_id, last_verified, source_path ON rag_documents BEGIN
    UPDATE rag_state SET value = value + 1 WHERE key = 'documents';
END;
-- The audit log: which retrieval, what it returned (ids only), and how it ended.
ALTER TABLE rag_retrieval_log ADD COLUMN retrieval_id TEXT;
ALTER TABLE rag_retrieval_log ADD COLUMN document_ids TEXT NOT NULL DEFAULT '[]';
ALTER TABLE rag_retrieval_log ADD COLUMN reason TEXT;
CREATE UNIQUE INDEX rag_retrieval_log_id ON rag_retrieval_log(retrieval_id);
"""

_0005_registry = """
-- The library watcher's registry: which document a file became, and when to retry.
ALTER TABLE rag_index_registry ADD COLUMN workspace_id TEXT;
ALTER TABLE rag_index_registry ADD COLUMN document_id TEXT;
ALTER TABLE rag_index_registry ADD COLUMN next_retry_at TEXT;
CREATE INDEX rag_index_registry_hash ON rag_index_registry(content_hash);
"""

_0006_chunking = """
-- How a document was chunked (rag.chunk_size/rag.chunk_overlap): the same text indexed
-- with other chunk settings is chunked again. NULL (documents stored before): as is.
ALTER TABLE rag_documents ADD COLUMN chunking TEXT;
"""

_0007_page_labels = """
-- The printed page label of a chunk's page (a PDF's "iv", or "9" on physical page 12),
-- where it differs from the physical page number. NULL: none, or stored before.
ALTER TABLE rag_chunks ADD COLUMN page_label TEXT;
"""

_0008_service = """
-- API keys of `tether serve` and `tether mcp`: only a hash of each secret is kept. A key is
-- bound to workspaces (a JSON list); every key reads the global library.
CREATE TABLE api_keys (
    id            TEXT PRIMARY KEY,
    key_hash      TEXT NOT NULL UNIQUE,
    name          TEXT,
    workspaces    TEXT NOT NULL DEFAULT '[]',
    global_write  INTEGER NOT NULL DEFAULT 0 CHECK (global_write IN (0, 1)),
    read_only     INTEGER NOT NULL DEFAULT 0 CHECK (read_only IN (0, 1)),
    admin         INTEGER NOT NULL DEFAULT 0 CHECK (admin IN (0, 1)),
    created_at    TEXT NOT NULL,
    revoked_at    TEXT,
    last_used_at  TEXT
);
-- The workspace an audit row's scope belongs to (a session's workspace for a session
-- scope), so that the log can be read per workspace in SQL.
ALTER TABLE rag_retrieval_log ADD COLUMN workspace_id TEXT;
UPDATE rag_retrieval_log SET workspace_id = CASE json_extract(scope, '$.kind')
    WHEN 'session' THEN (SELECT s.workspace_id FROM sessions s
                         WHERE s.id = json_extract(rag_retrieval_log.scope, '$.id'))
    ELSE json_extract(scope, '$.id') END;
CREATE INDEX rag_retrieval_log_workspace ON rag_retrieval_log(workspace_id, id);
"""

_0009_audit_citations = """
-- How a retrieval numbered its sources, ids only ([{"number", "document_id", "chunk_ids"}]),
-- so that a draft's [n] can be verified against the audit row by any process, later.
ALTER TABLE rag_retrieval_log ADD COLUMN citations TEXT NOT NULL DEFAULT '[]';
"""

_0010_document_changes = """
-- Which documents changed, in order: a reader's in-memory vector index and its scope memo
-- apply the documents changed since the change they last saw (a delta, from this process
-- or any other) instead of reloading every vector, or every scope's documents, after any
-- write. `vectors` 1: its vectors (or chunks) changed; 0: what decides which scopes see it
-- (existence, workspace, status, tags, path, attachments). Rows are only appended (one
-- b-tree append per changed row, the cheapest a trigger can do); the oldest are dropped
-- once there are 100,000 newer ones, and a reader that finds its place dropped reloads.
-- AUTOINCREMENT keeps seq growing across those deletes.
CREATE TABLE rag_document_changes (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    document_id  TEXT NOT NULL,
    vectors      INTEGER NOT NULL CHECK (vectors IN (0, 1))
);
CREATE TRIGGER rag_document_changes_prune AFTER INSERT ON rag_documents BEGIN
    DELETE FROM rag_document_changes
        WHERE seq < (SELECT max(seq) FROM rag_document_changes) - 100000;
END;
"""
_CHANGE_TRIGGER = """
CREATE TRIGGER rag_document_changes_{name} AFTER {event} BEGIN
    INSERT INTO rag_document_changes (document_id, vectors)
        SELECT document_id, {vectors} FROM (SELECT ({document}) AS document_id)
        WHERE document_id IS NOT NULL;
END;
"""
_0010_document_changes += "".join(
    _CHANGE_TRIGGER.format(name=name, event=event, vectors=vectors, document=document)
    for name, event, vectors, document in (
        (
            "embedding_insert",
            "INSERT ON rag_embeddings",
            1,
            "SELECT document_id FROM rag_chunks WHERE id = NEW.chunk_id",
        ),
        (
            "embedding_update",
            "UPDATE ON rag_embeddings",
            1,
            "SELECT document_id FROM rag_chunks WHERE id = NEW.chunk_id",
        ),
        # A vector deleted with its chunk (by cascade) may find the chunk gone already:
        # the chunk's own delete names the document then.
        (
            "embedding_delete",
            "DELETE ON rag_embeddings",
            1,
            "SELECT document_id FROM rag_chunks WHERE id = OLD.chunk_id",
        ),
        ("chunk_delete", "DELETE ON rag_chunks", 1, "SELECT OLD.document_id"),
        ("document_insert", "INSERT ON rag_documents", 0, "SELECT NEW.id"),
        ("document_delete", "DELETE ON rag_documents", 0, "SELECT OLD.id"),
        (
            "document_update",
            "UPDATE OF workspace_id, status, domain, source_type,"
            " project_id, last_verified, source_path, indexed_at ON rag_documents",
            0,
            "SELECT NEW.id",
        ),
        ("attach", "INSERT ON rag_document_sessions", 0, "SELECT NEW.document_id"),
        ("detach", "DELETE ON rag_document_sessions", 0, "SELECT OLD.document_id"),
    )
)

_0011_audit_asker = """
-- The API key that asked for each retrieval (NULL: the library's own caller), so that the
-- global library's rows are shown to the asker's workspaces only.
ALTER TABLE rag_retrieval_log ADD COLUMN asked_by TEXT;
"""

_0012_store_language = """
-- What a store was made with and must be opened with: its language ('english' in a store
-- made before; a store made for another one replaces its FTS5 table: language_fts_sql).
CREATE TABLE rag_store_settings (
    key    TEXT PRIMARY KEY,
    value  TEXT NOT NULL
) WITHOUT ROWID;
INSERT INTO rag_store_settings (key, value) VALUES ('language', 'english');
"""


# The triggers that queue each new or changed chunk and take a deleted one out of the
# index, with the values it was indexed with ({old_content}, {old_title}).
_CHUNK_TRIGGERS = """\
CREATE TRIGGER rag_chunks_fts_insert AFTER INSERT ON rag_chunks BEGIN
    INSERT OR IGNORE INTO rag_fts_pending (id) VALUES (new.id);
END;

-- A queued chunk is not in the index yet: it leaves the queue, and nothing is deleted.
CREATE TRIGGER rag_chunks_fts_delete AFTER DELETE ON rag_chunks BEGIN
    INSERT INTO rag_chunks_fts (rag_chunks_fts, rowid, content, section_title)
        SELECT 'delete', old.id, {old_content}, {old_title}
        WHERE NOT EXISTS (SELECT 1 FROM rag_fts_pending WHERE id = old.id);
    DELETE FROM rag_fts_pending WHERE id = old.id;
END;

CREATE TRIGGER rag_chunks_fts_update AFTER UPDATE OF content, section_title ON rag_chunks BEGIN
    INSERT INTO rag_chunks_fts (rag_chunks_fts, rowid, content, section_title)
        SELECT 'delete', old.id, {old_content}, {old_title}
        WHERE NOT EXISTS (SELECT 1 FROM rag_fts_pending WHERE id = old.id);
    INSERT OR IGNORE INTO rag_fts_pending (id) VALUES (new.id);
END;
"""


def fts_triggers_sql(language: str) -> str:
    """The triggers that keep the FTS5 index of a store of ``language`` in step with
    ``rag_chunks``, and the view the queue is indexed from (see :data:`_0013_fts_queue`)."""
    if language == "english":
        content, title = "{row}.content", "{row}.section_title"
    else:
        lang = check_language(language)
        content = f"{STEMMED_TEXT}({{row}}.content, '{lang}')"
        title = f"{STEMMED_TEXT}({{row}}.section_title, '{lang}')"
    return _FTS_TRIGGERS.format(
        source_content=content.format(row="rag_chunks"),
        source_title=title.format(row="rag_chunks"),
        old_content=content.format(row="old"),
        old_title=title.format(row="old"),
    )


_FTS_TRIGGERS = (
    """
DROP TRIGGER IF EXISTS rag_chunks_fts_insert;
DROP TRIGGER IF EXISTS rag_chunks_fts_delete;
DROP TRIGGER IF EXISTS rag_chunks_fts_update;
DROP VIEW IF EXISTS rag_fts_source;

-- What the index holds for each chunk, read when the queue is indexed.
CREATE VIEW rag_fts_source AS
    SELECT id, {source_content} AS content, {source_title} AS section_title
    FROM rag_chunks;

"""
    + _CHUNK_TRIGGERS
)


def _fts_queue_sql(language: str) -> str:
    return """
-- A chunk's row enters the FTS5 index when its transaction commits, all of the
-- transaction's new chunks in one statement (fts_upkeep.index_queued), not one by one
-- from a trigger: FTS5 writes its pending terms out as a new segment at every statement
-- savepoint, and a trigger on each chunk made one tiny segment per chunk (indexing
-- SciFact's chunks took 0.9 s where one statement takes 0.3 s).
CREATE TABLE rag_fts_pending (id INTEGER PRIMARY KEY);
""" + fts_triggers_sql(language)


def language_fts_sql(language: str) -> str:
    """SQL that makes a new English store one of ``language`` (a name of
    :data:`tether.text.LANGUAGES`, not English): its FTS5 table indexes Snowball stems,
    with case and diacritics folded (``remove_diacritics 2``) and no porter."""
    language = check_language(language)
    return fts_index_sql(language) + (
        f"\nUPDATE rag_store_settings SET value = '{language}' WHERE key = 'language';\n"
    )


def queued_language_fts_sql(language: str) -> str:
    """:func:`language_fts_sql` as it was up to migration 13 (the FTS5 table read the
    chunks alone): how a store of ``language`` made then looks, for a store migrated no
    further than that."""
    language = check_language(language)
    return fts_triggers_sql(language) + _QUEUED_LANGUAGE_FTS.format(
        stem=STEMMED_TEXT, language=language
    )


_QUEUED_LANGUAGE_FTS = """
DROP TABLE rag_chunks_fts;

-- What the index holds: each chunk's text as Snowball stems (FTS5 has no Snowball
-- tokenizer). FTS5 reads it through this view to rebuild or check the index.
CREATE VIEW rag_chunks_stemmed AS
    SELECT id, {stem}(content, '{language}') AS content,
           {stem}(section_title, '{language}') AS section_title
    FROM rag_chunks;

CREATE VIRTUAL TABLE rag_chunks_fts USING fts5(
    content,
    section_title,
    content = 'rag_chunks_stemmed',
    content_rowid = 'id',
    tokenize = 'unicode61 remove_diacritics 2'
);

INSERT INTO rag_chunks_fts (rag_chunks_fts) VALUES ('rebuild');
DELETE FROM rag_fts_pending;
UPDATE rag_store_settings SET value = '{language}' WHERE key = 'language';
"""


def fts_index_sql(language: str) -> str:
    """The FTS5 index of a store of ``language``, made again from its chunks: the view it
    reads, the table, the triggers that keep it in step, and its rebuild.

    Each chunk is indexed with its section path, else its document's title, as its vector
    is made under them (:func:`tether.ingest.chunking.context_header`). A chunk from a
    document without headings (an abstract, a note, a PDF without an outline) is then
    found by the words of its title, as its vector is. The title is read from the
    document, so a new title re-indexes the chunks that carry it
    (``rag_documents_fts_title``), and a document's chunks are deleted before it
    (``rag_documents_chunks_first``), while the title they were indexed with can still
    be read."""
    if language == "english":
        stem, tokenize = "{}", "porter unicode61 remove_diacritics 2"
    else:
        stem = f"{STEMMED_TEXT}({{}}, '{check_language(language)}')"
        tokenize = "unicode61 remove_diacritics 2"

    def header(row: str, title: str) -> str:
        return stem.format(f"coalesce({row}.section_title, {title})")

    def title_of(row: str) -> str:
        return f"(SELECT title FROM rag_documents WHERE id = {row}.document_id)"

    return _FTS_INDEX.format(
        tokenize=tokenize,
        source_content=stem.format("c.content"),
        source_title=header("c", "d.title"),
        old_content=stem.format("old.content"),
        old_title=header("old", title_of("old")),
        chunk_content=stem.format("c.content"),
        chunk_title=stem.format("old.title"),
    )


_FTS_INDEX = (
    """
DROP TRIGGER IF EXISTS rag_chunks_fts_insert;
DROP TRIGGER IF EXISTS rag_chunks_fts_delete;
DROP TRIGGER IF EXISTS rag_chunks_fts_update;
DROP TRIGGER IF EXISTS rag_documents_chunks_first;
DROP TRIGGER IF EXISTS rag_documents_fts_title;
DROP TABLE IF EXISTS rag_chunks_fts;
DROP VIEW IF EXISTS rag_chunks_stemmed;
DROP VIEW IF EXISTS rag_fts_source;

-- What the index holds for each chunk: its text and its context header (its section
-- path, else its document's title), as the store's language has FTS5 see them. FTS5
-- reads it to rebuild or check the index; the queue is indexed from it.
CREATE VIEW rag_fts_source AS
    SELECT c.id AS id, {source_content} AS content, {source_title} AS section_title
    FROM rag_chunks c JOIN rag_documents d ON d.id = c.document_id;

CREATE VIRTUAL TABLE rag_chunks_fts USING fts5(
    content,
    section_title,
    content = 'rag_fts_source',
    content_rowid = 'id',
    tokenize = '{tokenize}'
);
INSERT INTO rag_chunks_fts (rag_chunks_fts) VALUES ('rebuild');
DELETE FROM rag_fts_pending;

"""
    + _CHUNK_TRIGGERS
    + """
-- A document's chunks go first, while the title they were indexed with is there to read
-- (a cascade would delete them after it).
CREATE TRIGGER rag_documents_chunks_first BEFORE DELETE ON rag_documents BEGIN
    DELETE FROM rag_chunks WHERE document_id = old.id;
END;

-- A new title: the chunks indexed under the old one leave the index and are queued again.
CREATE TRIGGER rag_documents_fts_title AFTER UPDATE OF title ON rag_documents
WHEN old.title IS NOT new.title BEGIN
    INSERT INTO rag_chunks_fts (rag_chunks_fts, rowid, content, section_title)
        SELECT 'delete', c.id, {chunk_content}, {chunk_title}
        FROM rag_chunks c
        WHERE c.document_id = old.id AND c.section_title IS NULL
          AND NOT EXISTS (SELECT 1 FROM rag_fts_pending p WHERE p.id = c.id);
    INSERT OR IGNORE INTO rag_fts_pending (id)
        SELECT id FROM rag_chunks WHERE document_id = old.id AND section_title IS NULL;
END;
"""
)


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "core: workspaces, sessions, documents, chunks, fts", _0001_core),
    Migration(2, "embeddings, index registry, retrieval log", _0002_embeddings_registry_audit),
    Migration(3, "change counters for reader caches", _0003_change_counters),
    Migration(4, "governance: tag index, tag-aware cache counter, audit columns", _0004_governance),
    Migration(5, "registry: document, workspace and retry columns", _0005_registry),
    Migration(6, "the chunk settings each document was chunked with", _0006_chunking),
    Migration(7, "printed page labels of chunks", _0007_page_labels),
    Migration(8, "API keys; the workspace of each audit row", _0008_service),
    Migration(9, "the numbered citations of each audit row", _0009_audit_citations),
    Migration(10, "which documents changed, for delta reloads", _0010_document_changes),
    Migration(11, "the API key that asked for each retrieval", _0011_audit_asker),
    Migration(12, "the language the store was made for", _0012_store_language),
    Migration(
        13,
        "new chunks wait in a queue for the FTS5 index",
        _fts_queue_sql("english"),
        for_language=_fts_queue_sql,
    ),
    Migration(
        14,
        "chunks without a section title are indexed under their document's title",
        fts_index_sql("english"),
        for_language=fts_index_sql,
    ),
)

LATEST_VERSION = MIGRATIONS[-1].version
#: The migration after which new chunks wait in ``rag_fts_pending`` for the index.
FTS_QUEUE_VERSION = 13
#: The migration after which each chunk is indexed with its context header.
FTS_HEADER_VERSION = 14
