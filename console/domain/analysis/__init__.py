"""Pure analysis: rates, ETAs, stall detection, flag diffs, fit planning. No I/O, no Textual."""
