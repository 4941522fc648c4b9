"""One model over several hosts (issue 37): a deployment of nodes, each a host profile with its
role (a rank of a multi-node server, a prefill or decode server, the router) and node rank.

    profile.py   the [deployments.NAME] tables of the config, checked
    state.py     the deployment's state, derived from its nodes' HostStates (never a copy of them)
    probe.py     the one bounded command per node: its clock, SGLang version, the dist-init-addr
    checks.py    the checks across nodes (the units' diff, the downloads, the rendezvous)
    text.py      format_* functions: the deployment as text (the screen and the CLI print it)
    fit.py       the fit per node: the single host's planner on each node's GPUs and share of TP × PP
    router.py    the router's own view of its workers (GET /workers), read on its host during a swap
    swap.py      the swap across nodes, or one side of a PD pair: each node's plan walked, confirmed once,
                 the gate and the two-person rule taken once, the report read back from the nodes
    node_steps.py  each node's plan: the swap engine's step objects (the table's restart row on a
                 unit) run by a NodeExecutor (the engine's Executor), skips said with their reason
    recording.py a deployment session recorded (a Recorder per node, probes, reports) and replayed
No module here imports Textual, except screen.py.
"""
