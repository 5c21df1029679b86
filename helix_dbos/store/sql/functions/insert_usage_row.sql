-- helix.usage_log is a view of helix.step_usage and the usage step_finish events hold
-- (021). A row inserted into it by name (by a worker of the release before, say) is
-- stored as it comes; its id comes from helix.step_usage's identity.
CREATE OR REPLACE FUNCTION helix.insert_usage_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO helix.step_usage (session_num, run, step, source, name, input_tokens, output_tokens,
                                  total_tokens, cost_usd, ms, success, created_at)
    VALUES (NEW.session_num, NEW.run, NEW.step, NEW.source, NEW.name, COALESCE(NEW.input_tokens, 0),
            COALESCE(NEW.output_tokens, 0), COALESCE(NEW.total_tokens, 0), NEW.cost_usd, COALESCE(NEW.ms, 0),
            COALESCE(NEW.success, true), COALESCE(NEW.created_at, now()))
    RETURNING id INTO NEW.id;
    RETURN NEW;
END;
$$;
