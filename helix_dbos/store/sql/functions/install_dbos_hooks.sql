-- (Re)create helix's triggers on DBOS's tables (004). `helix-dbos migrate` and every
-- executor call it after DBOS's own migrations, so a `dbos reset` or a DBOS upgrade that
-- recreates a table is healed.
CREATE OR REPLACE FUNCTION helix.install_dbos_hooks() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF to_regclass('dbos.workflow_status') IS NULL OR to_regclass('dbos.notifications') IS NULL
       OR to_regclass('dbos.operation_outputs') IS NULL THEN
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
        EXECUTE FUNCTION helix.refuse_pickled('messages to helix topics must be portable JSON');
    CREATE OR REPLACE TRIGGER helix_refuse_pickled_run
        BEFORE INSERT ON dbos.workflow_status
        FOR EACH ROW WHEN (NEW.name IN ('helix_agent_run', 'helix_await_answers')
                           AND NEW.serialization IS DISTINCT FROM 'portable_json')
        EXECUTE FUNCTION helix.refuse_pickled('helix_agent_run takes portable JSON input');
    CREATE OR REPLACE TRIGGER helix_write_carried_events
        BEFORE INSERT ON dbos.operation_outputs
        FOR EACH ROW WHEN (NEW.serialization = 'portable_json' AND strpos(left(NEW.output, 24), '"helix_events"') > 0)
        EXECUTE FUNCTION helix.write_carried_events();
END;
$$;
