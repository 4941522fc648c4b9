"""Reaching a host and reading it: the transport, the sources, the parsers of host output."""
