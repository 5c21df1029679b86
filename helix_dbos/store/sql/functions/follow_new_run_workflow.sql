-- After DBOS creates a workflow of a helix run, its continuation
-- (helix:<s>:run:<n>:step:<k>) or its waiter (helix:<s>:run:<n>:wait:<k>): the run's
-- helix.runs.workflow_id names it, in the same transaction (010).
CREATE OR REPLACE FUNCTION helix.follow_new_run_workflow() RETURNS trigger LANGUAGE plpgsql AS $$
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
