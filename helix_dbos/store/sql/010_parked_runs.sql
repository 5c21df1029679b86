-- A run that waits for people parks: its workflow ends, a waiter workflow per waiting
-- step (helix:<s>:run:<n>:wait:<k>, named helix_await_answers) receives the answers and
-- enqueues the run's continuation (helix:<s>:run:<n>:step:<k>, a helix_agent_run).
-- helix.runs.workflow_id is the run's workflow of the moment: the newest of these, made
-- so in the transaction in which DBOS creates it, so helix's commands and DBOS's tools
-- always act on the workflow that holds the run.

CREATE FUNCTION helix.follow_new_run_workflow() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    m text[];
BEGIN
    m := regexp_match(NEW.workflow_uuid, '^helix:(.*):run:([0-9]+):(wait|step):[0-9]+$');
    IF m IS NOT NULL THEN
        UPDATE helix.runs SET workflow_id = NEW.workflow_uuid WHERE session_id = m[1] AND run = m[2]::integer;
    END IF;
    RETURN NULL;
END;
$$;

CREATE OR REPLACE FUNCTION helix.install_dbos_hooks() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF to_regclass('dbos.workflow_status') IS NULL OR to_regclass('dbos.notifications') IS NULL THEN
        RAISE EXCEPTION 'helix: DBOS''s system tables are not in this database (run DBOS''s migrations first)';
    END IF;
    CREATE OR REPLACE TRIGGER helix_follow_status
        AFTER UPDATE OF status ON dbos.workflow_status
        FOR EACH ROW WHEN (NEW.name IN ('helix_agent_run', 'helix_await_answers')
                           AND OLD.status IS DISTINCT FROM NEW.status)
        EXECUTE FUNCTION helix.follow_dbos_status();
    CREATE OR REPLACE TRIGGER helix_follow_new_workflow
        AFTER INSERT ON dbos.workflow_status
        FOR EACH ROW WHEN (NEW.name IN ('helix_agent_run', 'helix_await_answers'))
        EXECUTE FUNCTION helix.follow_new_run_workflow();
    CREATE OR REPLACE TRIGGER helix_refuse_pickled_message
        BEFORE INSERT ON dbos.notifications
        FOR EACH ROW WHEN (NEW.topic LIKE 'helix.%' AND NEW.serialization IS DISTINCT FROM 'portable_json')
        EXECUTE FUNCTION helix.refuse_pickled_message();
    CREATE OR REPLACE TRIGGER helix_refuse_pickled_run
        BEFORE INSERT ON dbos.workflow_status
        FOR EACH ROW WHEN (NEW.name IN ('helix_agent_run', 'helix_await_answers')
                           AND NEW.serialization IS DISTINCT FROM 'portable_json')
        EXECUTE FUNCTION helix.refuse_pickled_run();
END;
$$;
