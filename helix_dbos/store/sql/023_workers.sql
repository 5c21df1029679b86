-- Worker leases: one row per DBOS executor id that runs helix workflows.
--
-- A live process renews its row every few seconds (expires_at moves forward, in the
-- database's clock). A row whose lease expired, or that its process released, is adopted
-- by one live process of the same application: under the row's lock it hands the
-- executor's PENDING workflows back to their queues and marks the row adopted. A process
-- renews only while its token is still on the row and the row is live or draining, so a
-- process that finds itself adopted knows it at its next renewal.
CREATE TABLE helix.workers (
    executor_id         text PRIMARY KEY,
    application_name    text NOT NULL,
    application_version text NOT NULL,
    queues              text[],              -- NULL: every queue of the application
    host                text NOT NULL,
    pid                 integer NOT NULL,
    token               text NOT NULL,       -- the holder's; a new one at each acquire
    state               text NOT NULL CHECK (state IN ('live', 'draining', 'released', 'adopted')),
    started_at          timestamptz NOT NULL DEFAULT now(),
    last_seen           timestamptz NOT NULL DEFAULT now(),
    expires_at          timestamptz NOT NULL,
    adopted_by          text,
    adopted_at          timestamptz,
    adopted_runs        integer
);

CREATE INDEX workers_adoptable_idx ON helix.workers (application_name, application_version, expires_at)
    WHERE state IN ('live', 'draining', 'released');
