-- The statuses of a session with a run in progress: the same set as Python's
-- helix_dbos.types.ACTIVE_STATUSES (a test checks that they agree).
CREATE OR REPLACE FUNCTION helix.active_statuses() RETURNS text[] LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT ARRAY['active', 'awaiting_approval', 'awaiting_client_tool']
$$;
