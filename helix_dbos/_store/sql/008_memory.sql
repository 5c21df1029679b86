-- helix-dbos: agent memory (helix_dbos.memory, docs/memory.md).
--
-- A memory is a text in a namespace (a path of strings, e.g. {user,u-42}), optionally
-- under a key (remembering under a key again replaces its text), with JSON metadata, who
-- wrote it (session, run, step, tool call) and an optional expiry. An unkeyed memory is
-- stored once per namespace and text: content_hash (sha256 of the text) is unique there,
-- so concurrent identical writes make one row. Full-text search (the generated tsvector
-- `search`, GIN-indexed) finds a memory the moment it is committed.
--
-- Embeddings are optional: this migration needs no extension. Embedding spaces (a model
-- and its dimensions) are rows of helix.memory_spaces; the pgvector table of a space,
-- helix.memory_vectors_<id>, is created by code when the space is added on a server that
-- has pgvector (helix_dbos/_store/memories.py). helix.memory_embeddings says, per memory
-- and space, where its embedding is: pending, complete or failed (with the error and the
-- attempts), and for which content_hash it was computed, so a vector never stands for a
-- text that changed meanwhile. The embedding workflow of a memory in a space is named by
-- its generation, so DBOS runs it once per text and per retry-failed.
CREATE TABLE helix.memories (
    id            bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    namespace     text[]      NOT NULL CHECK (cardinality(namespace) BETWEEN 1 AND 16),
    key           text,
    content       text        NOT NULL,
    metadata      jsonb       NOT NULL DEFAULT '{}'::jsonb,
    content_hash  text        NOT NULL,
    session_id    text,
    run           integer,
    step          integer,
    tool_call_id  text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    expires_at    timestamptz,
    search        tsvector    GENERATED ALWAYS AS (to_tsvector('english'::regconfig, content)) STORED
);
CREATE UNIQUE INDEX memories_key_idx ON helix.memories (namespace, key) WHERE key IS NOT NULL;
CREATE UNIQUE INDEX memories_hash_idx ON helix.memories (namespace, content_hash) WHERE key IS NULL;
CREATE INDEX memories_namespace_idx ON helix.memories USING gin (namespace);
CREATE INDEX memories_search_idx ON helix.memories USING gin (search);
CREATE INDEX memories_expires_idx ON helix.memories (expires_at) WHERE expires_at IS NOT NULL;

CREATE TABLE helix.memory_spaces (
    id          integer     GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name        text        NOT NULL UNIQUE,           -- e.g. openai/text-embedding-3-small@1536
    model       text        NOT NULL,
    dimensions  integer     NOT NULL CHECK (dimensions BETWEEN 1 AND 16000),
    active      boolean     NOT NULL DEFAULT false,     -- the one vector search uses
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX memory_spaces_active_idx ON helix.memory_spaces (active) WHERE active;

CREATE TABLE helix.memory_embeddings (
    memory_id    bigint      NOT NULL REFERENCES helix.memories (id) ON DELETE CASCADE,
    space_id     integer     NOT NULL REFERENCES helix.memory_spaces (id) ON DELETE CASCADE,
    status       text        NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'complete', 'failed')),
    content_hash text        NOT NULL,                  -- the text the status is about
    attempts     integer     NOT NULL DEFAULT 0,
    error        text,
    generation   integer     NOT NULL DEFAULT 0,         -- +1 each time it is made pending again
    updated_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (memory_id, space_id)
);
CREATE INDEX memory_embeddings_todo_idx ON helix.memory_embeddings (space_id, status) WHERE status <> 'complete';
