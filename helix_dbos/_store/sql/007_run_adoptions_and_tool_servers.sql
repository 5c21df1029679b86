-- helix-dbos: where a run's work came from: the worker it was adopted from, the server of a tool.
--
-- Run adoptions: which runs a live process adopted, from which worker, and why.
-- A process adopts the lease of a worker of its application version that died (its lease
-- expired) or stopped (released its lease) and hands that worker's PENDING workflows back
-- to their queues (helix_dbos/_client/leases.py). In the same transaction it records here
-- each run those workflows belong to (a run's own workflow, or the waiter of its pending
-- calls): `helix-dbos show`, `helix-dbos tail` and the console say that the run was
-- adopted, from which worker and by which. One row per run and worker; a run adopted
-- twice has two. Deleting a run (prune) deletes its rows.
CREATE TABLE helix.run_adoptions (
    session_num   bigint      NOT NULL,
    run           integer     NOT NULL,
    from_executor text        NOT NULL,
    from_status   text        NOT NULL CHECK (from_status IN ('dead', 'released')),
    adopted_by    text        NOT NULL,
    adopted_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session_num, run, from_executor),
    FOREIGN KEY (session_num, run) REFERENCES helix.runs (session_num, run) ON DELETE CASCADE
);

-- The tools a run's toolsets (MCP servers) offered, by the name the model calls them, and
-- the toolset (server) each came from: written by the run's listing step
-- (helix_dbos/_durable/toolset_runs.py), so `helix-dbos show` and the console name an MCP
-- call with its server. Deleting a run (prune) deletes its rows.
CREATE TABLE helix.toolset_tools (
    session_num bigint NOT NULL,
    run         integer NOT NULL,
    tool_name   text   NOT NULL,
    toolset     text   NOT NULL,
    PRIMARY KEY (session_num, run, tool_name),
    FOREIGN KEY (session_num, run) REFERENCES helix.runs (session_num, run) ON DELETE CASCADE
);
