"""How a step's tool calls run (internal: import from ``helix_dbos``). Its modules::

    phases.py          workflow code: which calls run in phase 1 (in parallel) and phase 2
                       (in order), each as one DBOS step whose outcome is published once
                       its checkpoint is saved
    call.py            the tool step's body: one call from its input to its outcome, within
                       its lifetime (a deadline, interrupt, abort)
    watch.py           the thread that tells running calls their run was interrupted or aborted
    held_outcomes.py   outcomes held in memory until DBOS saves their steps' checkpoints
    attempts.py        each attempt at a call recorded; a run that lost max_worker_losses
                       workers with the same call in flight fails instead of running it again
"""
