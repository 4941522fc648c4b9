"""The fleet: many hosts in one console over SSH (`hosts`, `screen`), their readings out to
Prometheus (`metrics`), and the fleet read from an existing Prometheus (`prom`)."""
