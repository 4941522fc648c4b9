"""What the console knows: SGLang's flags and logs, fits, benchmarks, swaps, fleets."""
