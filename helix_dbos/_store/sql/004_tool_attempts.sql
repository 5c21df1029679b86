-- Where each tool call's body was started: one row per process that started it. A step
-- that runs a call again (its run was handed to another worker) counts the earlier
-- attempts whose process was lost (no live lease of its executor id, host and pid taken
-- before the attempt: killed, frozen past its lease, cut off, restarted); past the
-- agent's max_worker_losses the run ends failed instead of running the call once more
-- (helix_dbos/_durable/tool_execution/attempts.py). A process that releases its lease (a
-- drain) deletes its rows: what it handed back was not lost.
CREATE TABLE helix.tool_attempts (
    session_num  bigint      NOT NULL REFERENCES helix.sessions (num),
    step         integer     NOT NULL,
    tool_call_id text        NOT NULL,
    executor_id  text        NOT NULL,
    host         text        NOT NULL,
    pid          integer     NOT NULL,
    process      text        NOT NULL,  -- a random id of the process, new at each start
    started_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session_num, step, tool_call_id, process)
);

CREATE INDEX tool_attempts_process_idx ON helix.tool_attempts (process);
