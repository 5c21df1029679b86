-- A tool's input and result, and the model's text, were stored three times a turn: in
-- DBOS's checkpoint, in the stream and in the transcript (issue 19). The transcript's rows
-- now leave out what the step's events in the stream hold word for word, and read it back
-- from there (helix.compact_messages, helix.expand_messages): on the peers' workload,
-- built from the same rows, the transcript takes 526 -> 288 bytes a turn.
--
-- The rows as stored move to helix.step_messages; helix.transcript becomes a view of it
-- with the messages whole, so a worker of the release before, which reads
-- helix.transcript with its own SQL while a rolling deploy runs, reads them as they were,
-- and its fork's inserts land (helix.insert_transcript_step). helix.messages, a view of
-- the transcript, is made again over the view. No row changes: rows stored before stay
-- whole and are shown as they are.
ALTER TABLE helix.transcript RENAME TO step_messages;
ALTER TABLE helix.step_messages RENAME CONSTRAINT transcript_pkey TO step_messages_pkey;
ALTER TABLE helix.step_messages RENAME CONSTRAINT transcript_messages_check TO step_messages_messages_check;
ALTER TABLE helix.step_messages RENAME CONSTRAINT transcript_session_num_fkey TO step_messages_session_num_fkey;

DROP VIEW helix.messages;
CREATE VIEW helix.transcript AS
SELECT session_num, first_seq, run, step, helix.expand_messages(session_num, run, step, messages) AS messages
  FROM helix.step_messages;
CREATE TRIGGER transcript_insert INSTEAD OF INSERT ON helix.transcript
    FOR EACH ROW EXECUTE FUNCTION helix.insert_transcript_step();

CREATE VIEW helix.messages AS
SELECT s.id AS session_id, (t.first_seq + m.ord - 1)::integer AS seq, t.run, t.step, m.message
  FROM helix.transcript t JOIN helix.sessions s ON s.num = t.session_num
 CROSS JOIN LATERAL jsonb_array_elements(t.messages) WITH ORDINALITY AS m(message, ord);
CREATE TRIGGER messages_insert INSTEAD OF INSERT ON helix.messages
    FOR EACH ROW EXECUTE FUNCTION helix.insert_message_by_id();
