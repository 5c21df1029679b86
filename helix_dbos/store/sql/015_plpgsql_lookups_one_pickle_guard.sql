-- The stream's lookups keep their plans on the connection, and one function refuses what
-- DBOS would unpickle (issue 19).
--
-- helix.unwritten_events and helix.last_event_seq were LANGUAGE sql. A SQL function whose
-- body has a FROM or a subquery is not inlined, and Postgres plans its body again in every
-- statement that calls it: about 0.19 ms for unwritten_events, 0.03 ms for
-- last_event_seq, each called about four times a turn inside DBOS's checkpoint
-- transactions and the step commit. As plpgsql they are planned once per connection.
--
-- The two triggers that refuse what DBOS would unpickle share one function,
-- helix.refuse_pickled, which takes its message as the trigger's argument; install_dbos_hooks
-- points them at it after this file, in the same transaction.
DROP FUNCTION IF EXISTS helix.refuse_pickled_message(), helix.refuse_pickled_run() CASCADE;
DELETE FROM helix.schema_functions WHERE name IN ('refuse_pickled_message', 'refuse_pickled_run');

-- The functions this version changed are in functions/, each as it is now: migrate
-- applies a function's file whenever it changed (helix_dbos/store/migrations.py).
