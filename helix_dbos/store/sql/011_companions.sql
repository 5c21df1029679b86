-- Persistent sub-agents ("companions", seed 004): a parent's named children, and the
-- notices that tell a parent a non-blocking companion's run ended.

CREATE TABLE helix.companions (
    session_id       text        NOT NULL REFERENCES helix.sessions (id),   -- the parent
    name             text        NOT NULL,
    agent_type       text        NOT NULL,
    mode             text        NOT NULL CHECK (mode IN ('blocking', 'non-blocking')),
    child_session_id text        NOT NULL UNIQUE REFERENCES helix.sessions (id),
    created_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session_id, name)
);

-- One row per ended run of a non-blocking companion. The parent's next step takes the
-- rows not yet delivered into its transcript (delivered_run/step say where); a row
-- delivered at a step that was never committed (its run was aborted) is delivered again.
CREATE TABLE helix.companion_notices (
    session_id       text        NOT NULL REFERENCES helix.sessions (id),   -- the parent
    child_session_id text        NOT NULL REFERENCES helix.sessions (id),
    run              integer     NOT NULL,
    name             text        NOT NULL,
    status           text        NOT NULL,
    output           jsonb,
    error            text,
    created_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    delivered_run    integer,
    delivered_step   integer,
    PRIMARY KEY (child_session_id, run)
);
CREATE INDEX companion_notices_parent_idx ON helix.companion_notices (session_id);

CREATE TRIGGER companion_notice AFTER UPDATE OF status ON helix.runs
    FOR EACH ROW WHEN (NEW.status IN ('completed', 'failed') AND OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION helix.notice_companion_end();
