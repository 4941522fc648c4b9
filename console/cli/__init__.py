"""The command line: `main` parses and dispatches, one module per subcommand."""
