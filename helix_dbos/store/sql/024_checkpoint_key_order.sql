-- A tool result reads back with its keys in the order the tool wrote them, whichever way it
-- comes back: jsonb sorts an object's keys, json keeps its text.
--
-- helix.tool_outcomes.outcome becomes json: a run handed to another worker while its tool
-- ran returns the outcome the first worker recorded, and must write the same transcript
-- as a run that was never moved. helix.write_carried_events saves a checkpoint without its
-- carried events through json (the function's file) for the same reason.
ALTER TABLE helix.tool_outcomes ALTER COLUMN outcome TYPE json USING outcome::json;
