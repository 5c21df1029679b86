"""A run's children (internal: import from ``helix_dbos``). They run after a step's tool
phases, in call order, so a replay finds every child at the same position. Its modules::

    dispatch.py          sub-agents: each call starts a child workflow with its own session
    remote_dispatch.py   remote sub-agents: a call runs on another helix server
    companion_calls.py   companions (persistent sub-agents): the companion tools' calls and
                         the notices of non-blocking companions
    companion_steps.py   the companion tools' checkpointed transactions
"""
