-- helix-dbos schema, version 1: sessions, runs, the append-only transcript, the state
-- patch log, pending HITL tool calls, the durable event stream and usage.
-- Everything a person may need to read is jsonb; nothing here is pickled.

CREATE TABLE helix.sessions (
    id                  text PRIMARY KEY,
    agent_name          text        NOT NULL,
    status              text        NOT NULL DEFAULT 'active',
    step_count          integer     NOT NULL DEFAULT 0,
    version             bigint      NOT NULL DEFAULT 0,       -- compare-and-set counter
    run_count           integer     NOT NULL DEFAULT 0,
    message_count       integer     NOT NULL DEFAULT 0,
    event_seq           bigint      NOT NULL DEFAULT 0,
    output              jsonb,
    error               text,
    stop_reason         text,
    interrupt_requested boolean     NOT NULL DEFAULT false,
    parent_session_id   text        REFERENCES helix.sessions (id),
    parent_tool_call_id text,
    root_session_id     text        NOT NULL,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX sessions_parent_idx ON helix.sessions (parent_session_id) WHERE parent_session_id IS NOT NULL;
CREATE INDEX sessions_root_idx ON helix.sessions (root_session_id);
CREATE INDEX sessions_updated_idx ON helix.sessions (updated_at DESC);

CREATE TABLE helix.runs (
    session_id  text        NOT NULL REFERENCES helix.sessions (id),
    run         integer     NOT NULL,
    workflow_id text        NOT NULL UNIQUE,
    kind        text        NOT NULL DEFAULT 'execute',           -- execute | resume
    status      text        NOT NULL DEFAULT 'active',
    start_step  integer     NOT NULL,
    end_step    integer,
    start_seq   bigint      NOT NULL,                             -- first event of the run
    stop_reason text,
    error       text,
    started_at  timestamptz NOT NULL DEFAULT now(),
    ended_at    timestamptz,
    PRIMARY KEY (session_id, run)
);

CREATE TABLE helix.messages (
    session_id text    NOT NULL REFERENCES helix.sessions (id),
    seq        integer NOT NULL,
    run        integer NOT NULL,
    step       integer NOT NULL,
    message    jsonb   NOT NULL,
    PRIMARY KEY (session_id, seq)
);

CREATE TABLE helix.state_patches (
    session_id text        NOT NULL REFERENCES helix.sessions (id),
    step       integer     NOT NULL,
    run        integer     NOT NULL,
    patch      jsonb       NOT NULL,                               -- RFC 6902 operations
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session_id, step)
);

-- Full copies of the custom state every so many steps, so rebuilding the state at any
-- step replays a bounded number of patches. Step 0 holds the initial state.
CREATE TABLE helix.state_snapshots (
    session_id text    NOT NULL REFERENCES helix.sessions (id),
    step       integer NOT NULL,
    state      jsonb   NOT NULL,
    PRIMARY KEY (session_id, step)
);

CREATE TABLE helix.pending_tool_calls (
    session_id      text        NOT NULL REFERENCES helix.sessions (id),
    tool_call_id    text        NOT NULL,
    root_session_id text        NOT NULL,
    workflow_id     text        NOT NULL,
    run             integer     NOT NULL,
    step            integer     NOT NULL,
    tool_name       text        NOT NULL,
    kind            text        NOT NULL CHECK (kind IN ('approval', 'client')),
    input           jsonb,
    output_schema   jsonb,
    status          text        NOT NULL DEFAULT 'pending'
                                CHECK (status IN ('pending', 'answered', 'timed_out', 'cancelled')),
    requested_at    timestamptz NOT NULL DEFAULT now(),
    deadline        timestamptz,
    PRIMARY KEY (session_id, tool_call_id)
);
CREATE INDEX pending_open_idx ON helix.pending_tool_calls (root_session_id) WHERE status = 'pending';

-- Audit: who answered a pending call, when, how and why. One row per accepted answer.
CREATE TABLE helix.tool_call_answers (
    session_id   text        NOT NULL,
    tool_call_id text        NOT NULL,
    kind         text        NOT NULL,
    approved     boolean,
    reason       text,
    answered_by  text,
    answer       jsonb       NOT NULL,
    answered_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session_id, tool_call_id),
    FOREIGN KEY (session_id, tool_call_id) REFERENCES helix.pending_tool_calls (session_id, tool_call_id)
);

CREATE TABLE helix.events (
    session_id text        NOT NULL REFERENCES helix.sessions (id),
    seq        bigint      NOT NULL,
    run        integer     NOT NULL,
    step       integer     NOT NULL,
    type       text        NOT NULL,
    data       jsonb       NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session_id, seq)
);

CREATE TABLE helix.usage (
    id            bigserial PRIMARY KEY,
    session_id    text             NOT NULL REFERENCES helix.sessions (id),
    run           integer          NOT NULL,
    step          integer          NOT NULL,
    source        text             NOT NULL CHECK (source IN ('llm', 'tool', 'client_tool_wait')),
    name          text             NOT NULL,
    input_tokens  integer          NOT NULL DEFAULT 0,
    output_tokens integer          NOT NULL DEFAULT 0,
    total_tokens  integer          NOT NULL DEFAULT 0,
    cost_usd      double precision,
    ms            double precision NOT NULL DEFAULT 0,
    success       boolean          NOT NULL DEFAULT true,
    created_at    timestamptz      NOT NULL DEFAULT now()
);
CREATE INDEX usage_session_idx ON helix.usage (session_id, run, step);

CREATE TRIGGER events_notify AFTER INSERT ON helix.events
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION helix.notify_event();
