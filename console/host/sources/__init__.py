"""Sources: what we ask the host and how often. Each emits `Reading`s and never raises.

Nothing here imports Textual: the same sources feed the app, `snapshot --json` and the tests.
"""
