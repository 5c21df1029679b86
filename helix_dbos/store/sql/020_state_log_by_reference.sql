-- A step's state patch was stored twice: as the step's state_patch event in the stream
-- and as its row in the state log (issue 19). The step commit no longer writes the row
-- when the step's '<run>.<step>.patch' event holds the patch word for word, and the
-- state log reads it from there: on the peers' workload about 150 bytes a turn (the
-- row and its key), and a step's state writes are stored once however large.
--
-- The rows as stored move to helix.step_patches: the patches no event holds as they are
-- (a step whose later tools wrote too, whose event is then only part of it), what hooks
-- wrote after a commit (part 1), a fork's, and every row before this version.
-- helix.state_log becomes a view: those rows, and each committed step's patch event that
-- no row of its step stands for (a row of part 0 always wins over the event). A step is
-- committed when its run wrote its step_finish, so the event of a step a run left
-- unfinished is never in the log. A worker of the release before reads, inserts into and
-- deletes from helix.state_log by name while a rolling deploy runs; the view takes its
-- inserts and deletes (helix.insert_step_patch, helix.delete_step_patch).
ALTER TABLE helix.state_log RENAME TO step_patches;
ALTER TABLE helix.step_patches RENAME CONSTRAINT state_log_pkey TO step_patches_pkey;
ALTER TABLE helix.step_patches RENAME CONSTRAINT state_log_part_check TO step_patches_part_check;
ALTER TABLE helix.step_patches RENAME CONSTRAINT state_log_session_num_fkey TO step_patches_session_num_fkey;

DROP VIEW helix.state_patches;
CREATE VIEW helix.state_log AS
SELECT session_num, step, part, run, patch, created_at FROM helix.step_patches
UNION ALL
SELECT e.session_num, e.step, 0::smallint, e.run, e.data->'patches', e.created_at
  FROM helix.stream e
 WHERE e.key LIKE '%.patch' AND e.key = e.run || '.' || e.step || '.patch' AND e.type = 'state_patch'
   AND EXISTS (SELECT 1 FROM helix.stream f
                WHERE f.session_num = e.session_num AND f.step = e.step
                  AND f.key = e.run || '.' || e.step || '.step_finish')
   AND NOT EXISTS (SELECT 1 FROM helix.step_patches r
                    WHERE r.session_num = e.session_num AND r.step = e.step AND r.part = 0);
CREATE TRIGGER state_log_insert INSTEAD OF INSERT ON helix.state_log
    FOR EACH ROW EXECUTE FUNCTION helix.insert_step_patch();
CREATE TRIGGER state_log_delete INSTEAD OF DELETE ON helix.state_log
    FOR EACH ROW EXECUTE FUNCTION helix.delete_step_patch();

CREATE VIEW helix.state_patches AS
SELECT s.id AS session_id, p.step, p.run, p.patch, p.created_at, p.part
  FROM helix.state_log p JOIN helix.sessions s ON s.num = p.session_num;
CREATE TRIGGER state_patches_insert INSTEAD OF INSERT ON helix.state_patches
    FOR EACH ROW EXECUTE FUNCTION helix.insert_state_patch_by_id();
