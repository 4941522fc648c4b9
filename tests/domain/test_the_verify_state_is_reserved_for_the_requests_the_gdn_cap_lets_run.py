"""The fit of the seeds' Qwen3.5-122B with MTP on 4 × 95.6 GiB said 42 running requests (the GDN
state slots' cap) and reserved speculative decoding's verification state for 48 (+1): SGLang
reserves it for `min(max_running_requests, max_mamba_cache_size // slots per request)` requests
(`kv_cache_configurator._handle_max_mamba_cache`, `capped_reqs`; docs/research/qwen35_fit.md §5),
so the fit took ~0.9 GiB per GPU from the KV pool that the server keeps."""

from __future__ import annotations

from typing import Any

import pytest

from console.demo.hostsim.downloader import qwen122b_config
from console.domain.analysis.fit import GIB, FitInputs, plan_fit

W122 = 248_837_128_000  # the simulated checkpoint's bytes (tests/domain/test_fit.py's)


def _seeds(**extra: Any) -> Any:
    return plan_fit(FitInputs(qwen122b_config(), W122, 4, 95.59, tp=4, mem_fraction_static=0.85,
                              context_len=262144, speculative_algorithm="NEXTN", speculative_num_draft_tokens=4,
                              **extra))


def _reserved_for(r: Any) -> float:
    """How many requests (+1) the verification state was sized for."""
    return r.spec_state_gib * GIB / (r.mamba_bytes_per_request * r.figures["draft_tokens"])


def test_the_gdn_cap_below_speculative_decodings_48_sizes_the_verify_state() -> None:
    r = _seeds()
    assert r.max_running_requests == r.mamba_slots // 3 < 48
    assert _reserved_for(r) == pytest.approx(r.max_running_requests + 1)


def test_the_gdn_cap_below_the_operators_own_cap_sizes_it_too() -> None:
    r = _seeds(max_running_requests=60)
    assert r.max_running_requests < 60
    assert _reserved_for(r) == pytest.approx(r.max_running_requests + 1)


def test_the_operators_cap_below_the_gdn_cap_sizes_it() -> None:
    r = _seeds(max_running_requests=20)
    assert r.max_running_requests == 20
    assert _reserved_for(r) == pytest.approx(21)


def test_the_kv_pool_keeps_what_the_smaller_reservation_leaves() -> None:
    """The smaller reservation leaves its difference to the KV pool: more tokens than 48 would."""
    r = _seeds()
    per_gpu_saved_gib = r.mamba_bytes_per_request * (48 - r.max_running_requests) * 4 / GIB
    assert per_gpu_saved_gib > 0.5
    assert r.kv_cache_gib + r.spec_state_gib + r.mamba_state_gib + r.free_gib == pytest.approx(
        r.figures["allowed_gib"] - r.weights_gib, abs=0.01)
