-- State written by hooks after a step's commit (on_message, after_tool, on_step_finish,
-- on_agent_complete; see helix_dbos/durable/hook_state.py).
--
-- A step may now have two patches: its commit's (part 0, written by helix.commit_step)
-- and, when the hooks that observe the committed step changed the state, the follow-up
-- save's (part 1, written by the checkpointed helix_save_hook_state transaction). The
-- state after step N is the snapshot at or before N plus every patch up to and
-- including N, in (step, part) order; a snapshot at step N holds the state after both.
ALTER TABLE helix.state_patches ADD COLUMN part smallint NOT NULL DEFAULT 0 CHECK (part IN (0, 1));
ALTER TABLE helix.state_patches DROP CONSTRAINT state_patches_pkey;
ALTER TABLE helix.state_patches ADD PRIMARY KEY (session_id, step, part);
