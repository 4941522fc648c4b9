"""A stand-in for the `sglang` package on the simulated host (installed as `sglang`)."""

__version__ = "0.5.23"
