-- The outcome of every tool call that returned (or raised), recorded by the worker the
-- moment the tool ends, outside the DBOS step that runs it.
--
-- DBOS does not save the output of a step whose workflow was cancelled while it ran
-- (an abort during a tool), and a crash can land between a tool's return and its
-- checkpoint. A tool step first looks here: a recorded outcome for the same session,
-- step and tool call (with the same name and arguments) is returned instead of running
-- the tool again, so `helix-dbos resume` after an abort never repeats a tool's effect.
-- The rows of a step go when the step commits (its checkpoint then holds the outcomes).
CREATE TABLE helix.tool_outcomes (
    session_id   text        NOT NULL REFERENCES helix.sessions (id),
    step         integer     NOT NULL,
    tool_call_id text        NOT NULL,
    run          integer     NOT NULL,
    tool_name    text        NOT NULL,
    call_digest  text        NOT NULL,  -- sha256 of the call's name and arguments
    outcome      jsonb       NOT NULL,  -- the tool step's ToolOutcome
    recorded_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session_id, step, tool_call_id)
);
