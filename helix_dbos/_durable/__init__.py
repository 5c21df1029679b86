"""The workflow side of helix: the code that runs inside DBOS workflows and steps.

Internal: nothing here is public API, and any name may change between releases. Import
from ``helix_dbos`` (``define_agent``, ``DBOSAgentExecutor``, ...), which re-exports
what users need.

One concept per module::

    workflow.py        the DBOS workflows of a run: helix_agent_run and helix_await_answers
    loop.py            one run, step by step: the LLM step, the tool phases, the commit
    tool_execution/    how a step's tool calls run: phases, the tool step, a call's
                       lifetime (deadline, interrupt, abort), outcomes held until checkpointed
    hitl.py            human waits: approval and client-tool gates, suspend, wait, settle
    children/          a run's children: sub-agents, remote sub-agents, companions
    hooks.py           calling user hooks, and saving what they write to the state
    streaming.py       what a run streams: durable step events, token deltas, live state
    runtime.py         what workflow code runs with: AgentRuntime (agents, LLM, transactions)
    run_scope.py       one run as workflow code sees it: RunScope
    dbos_log.py        DBOS's log stays quiet about helix runs that end through abort
    payloads.py        what crosses DBOS boundaries: workflow inputs, step inputs and outputs

No module here imports the client side (``helix_dbos._client``, ``helix_dbos._cli``,
``helix_dbos.server``), and no module imports another in a cycle.
"""
