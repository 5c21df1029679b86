"""The caller side: :class:`DBOSAgentExecutor`, the operator API (:mod:`helix_dbos.admin`),
handles, streams, queues, the launcher and the worker."""
