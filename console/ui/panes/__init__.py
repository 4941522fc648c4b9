"""Panes: Textual widgets that render the latest Reading and nothing else (no I/O, no parsing).

Each pane's look comes from a pure `format_*` function that is tested without an app.
"""
