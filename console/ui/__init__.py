"""The Textual UI: the app, the host and fleet screens, the panes. Nothing below imports it."""
