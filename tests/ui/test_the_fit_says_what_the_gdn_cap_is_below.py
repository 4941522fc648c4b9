"""The fit screen on the demo (the seeds' Qwen3.5-122B with MTP on 4 × 95.6 GiB) showed 'max running
requests 42', bound by 'GDN state slots (127 slots / 3 per request)', and never the 48 that
speculative decoding's default would allow: the operator could not tell the cap cost requests. The
binding constraint says what it is below."""

from __future__ import annotations

from typing import Any

from console.demo.hostsim.downloader import qwen122b_config
from console.domain.analysis.fit import FitInputs, plan_fit
from console.ui.panes.fit import format_fit

W122 = 248_837_128_000  # the simulated checkpoint's bytes (tests/domain/test_fit.py's)


def _seeds(**extra: Any) -> Any:
    return plan_fit(FitInputs(qwen122b_config(), W122, 4, 95.59, tp=4, mem_fraction_static=0.85,
                              context_len=262144, **extra))


def test_below_speculative_decodings_default_of_48_is_said() -> None:
    r = _seeds(speculative_algorithm="NEXTN", speculative_num_draft_tokens=4)
    assert r.max_running_requests < 48
    text = " ".join(format_fit(r).plain.split())
    assert "GDN state slots" in text and "below speculative decoding's default of 48" in text, text


def test_below_the_operators_own_cap_is_said() -> None:
    r = _seeds(speculative_algorithm="NEXTN", speculative_num_draft_tokens=4, max_running_requests=60)
    assert r.binding_constraint.startswith("GDN state slots")
    assert r.binding_constraint.endswith("below --max-running-requests 60"), r.binding_constraint
