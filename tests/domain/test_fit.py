"""The fit planner against research/qwen35_fit.md's tables and a real SGLang log of the 397B."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest

from console.domain.analysis.fit import FitInputs, auto_mem_fraction, calibration, plan_fit
from console.domain.analysis.log_state import LogTracker
from console.demo.hostsim.downloader import qwen122b_config
from console.ui.panes.fit import format_fit
from console.host.parsers.sglang_log import parse_line

W122 = 248_837_128_000


def qwen397b_config() -> dict:
    cfg = copy.deepcopy(qwen122b_config())
    cfg["text_config"].update({"hidden_size": 4096, "num_hidden_layers": 60, "num_experts": 512,
                               "num_experts_per_tok": 10})
    return cfg


def test_gdn_state_and_kv_bytes_match_the_research_tables() -> None:
    for tp, mib in ((1, 146.5), (2, 73.3), (4, 36.6), (8, 18.3)):
        r = plan_fit(FitInputs(qwen122b_config(), W122, 8, 139.8, tp=tp))
        assert r.mamba_bytes_per_request / 2**20 == pytest.approx(mib, abs=0.06), tp
    assert plan_fit(FitInputs(qwen122b_config(), W122, 8, 139.8, tp=1)).kv_bytes_per_token == 24_576
    assert plan_fit(FitInputs(qwen122b_config(), W122, 8, 139.8, tp=4)).kv_bytes_per_token == 12_288
    with_mtp = plan_fit(FitInputs(qwen122b_config(), W122, 8, 139.8, tp=4, speculative_algorithm="NEXTN"))
    assert with_mtp.kv_bytes_per_token == 13_312
    r397 = plan_fit(FitInputs(qwen397b_config(), 806_800_000_000, 8, 139.8, tp=2))
    assert r397.kv_bytes_per_token == 15_360


HYBRID = (Path(__file__).parent.parent / "data" / "sglang_hybrid_lines.txt").read_text().splitlines()


def _logged_caches() -> tuple[dict, dict]:
    """The Mamba and KV cache lines of a real SGLang log of the 397B at TP2 (kvcache-ai/ktransformers
    #1870, tests/data/sglang_hybrid_lines.txt lines 4-5), parsed by the console's own parser."""
    mamba, kv = parse_line(HYBRID[3]), parse_line(HYBRID[4])
    assert (mamba.phase, kv.phase) == ("mamba cache", "kv cache")
    return mamba.fields, kv.fields


def test_the_397b_tp2_state_and_kv_per_unit_reproduce_a_real_sglang_log() -> None:
    """The planner's own per-request GDN state and per-token KV bytes, times the slots and tokens the
    server logged, give the sizes it logged (SGLang's "GB" is GiB; each figure is rounded to 0.01)."""
    mamba, kv = _logged_caches()
    r = plan_fit(FitInputs(qwen397b_config(), 806_800_000_000, 2, 139.8, tp=2))
    slots = mamba["max_mamba_cache_size"] + 1  # SGLang allocates one padding slot
    assert slots * r.mamba_bytes_per_request / 2**30 == pytest.approx(mamba["ssm_gib"] + mamba["conv_gib"], abs=0.01)
    assert kv["tokens"] * r.kv_bytes_per_token / 2**30 == pytest.approx(kv["k_gib"] + kv["v_gib"], abs=0.01)


def test_the_h200_illustration_from_the_research() -> None:
    """122B BF16, TP4, H200, mem fraction 0.90, MTP D=4: ~371 slots, ~7.0 GiB verification state,
    ~3.7 M KV tokens, and the binding limit is speculative decoding's default of 48 requests."""
    r = plan_fit(FitInputs(qwen122b_config(), W122, 4, 139.8, tp=4, mem_fraction_static=0.90,
                           speculative_algorithm="NEXTN", speculative_num_draft_tokens=4))
    assert r.weights_gib == pytest.approx(58, abs=0.5)
    assert r.mamba_slots == pytest.approx(371, rel=0.05)
    assert r.spec_state_gib == pytest.approx(7.0, abs=0.05)
    assert r.max_total_tokens == pytest.approx(3_700_000, rel=0.05)
    assert r.max_running_requests == 48 and "48" in r.binding_constraint and r.fits


def test_the_seeds_host_is_bound_by_gdn_state_not_kv() -> None:
    r = plan_fit(FitInputs(qwen122b_config(), W122, 4, 95.59, tp=4, mem_fraction_static=0.85, context_len=262144,
                           speculative_algorithm="NEXTN", speculative_num_draft_tokens=4))
    assert r.fits and r.max_running_requests < 48
    assert r.binding_constraint.startswith("GDN state slots")
    assert r.weights_gib + r.reserved_gib + r.mamba_state_gib + r.spec_state_gib + r.kv_cache_gib <= 95.59


def test_auto_mem_fraction_h200_example() -> None:
    assert auto_mem_fraction(143_771 / 1024, 4, 1, 8192, 512) == pytest.approx(0.900, abs=0.001)


def test_the_seeds_arithmetic_was_wrong_for_the_397b() -> None:
    r = plan_fit(FitInputs(qwen397b_config(), 806_800_000_000, 4, 95.59, tp=4))
    assert not r.fits and r.binding_constraint.startswith("weights:")
    assert "DOES NOT FIT" in format_fit(r).plain


def test_unknown_architecture_and_quantized_checkpoints_say_what_is_assumed() -> None:
    r = plan_fit(FitInputs({"architectures": ["MysteryForCausalLM"], "hidden_size": 4096, "num_hidden_layers": 32,
                            "num_attention_heads": 32, "num_key_value_heads": 8}, 16_000_000_000, 1, 80.0))
    assert r.fits and r.kv_bytes_per_token == 8 * 128 * 2 * 32 * 2
    assert any("MysteryForCausalLM" in a and "generic" in a for a in r.assumptions)
    q = plan_fit(FitInputs({**qwen122b_config(), "quantization_config": {"quant_method": "modelopt"}},
                           120_000_000_000, 4, 95.59, tp=4))
    assert q.params_total is None and any("quantized checkpoint" in a for a in q.assumptions)
    bare = plan_fit(FitInputs({"architectures": ["X"]}, None, 1, 80.0))
    assert any("config.json lacks" in w for w in bare.warnings) and any("weight bytes unknown" in w for w in bare.warnings)


def test_calibration_rows_put_the_planner_beside_a_real_log() -> None:
    """The rows of the fit view's "predicted vs the server's log", from the real 397B TP2 log
    (ktransformers #1870), not from the simulator (whose figures were set near the planner's own:
    a circular check; issue 27). The log's slots and tokens come out as the server logged them; the
    per-slot and per-token bytes behind the prediction match what the server allocated for them."""
    mamba, kv = _logged_caches()
    r = plan_fit(FitInputs(qwen397b_config(), 806_800_000_000, 2, 139.8, tp=2))
    t = LogTracker("x")
    t.feed([parse_line(HYBRID[3]), parse_line(HYBRID[4])])
    rows = {label: (pred, actual) for label, pred, actual in calibration(r, t.summary())}
    # That host offloaded experts to the CPU (ktransformers): on GPUs alone the 397B does not fit at
    # TP2, and the planner says so, beside what the server logged.
    assert not r.fits and rows["KV tokens"] == (f"{r.max_total_tokens:,}", "580,364")
    per_slot_logged = (mamba["ssm_gib"] + mamba["conv_gib"]) * 2**30 / (mamba["max_mamba_cache_size"] + 1)
    per_token_logged = (kv["k_gib"] + kv["v_gib"]) * 2**30 / kv["tokens"]
    assert r.mamba_bytes_per_request == pytest.approx(per_slot_logged, rel=0.002)
    assert r.kv_bytes_per_token == pytest.approx(per_token_logged, rel=0.002)


def test_cli_json_and_bad_config(tmp_path: Path) -> None:
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(qwen122b_config()))
    (model / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": W122}, "weight_map": {}}))
    out = subprocess.run([sys.executable, "-m", "console", "fit", str(model), "--gpus", "4", "--gpu-mem", "95.59",
                          "--speculative-algorithm", "NEXTN", "--json"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert set(data) >= {"model", "params_total", "weight_bytes_total", "per_gpu", "kv_bytes_per_token",
                         "max_total_tokens", "max_running_requests", "fits", "binding_constraint", "warnings"}
    assert set(data["per_gpu"]) == {"weights_gib", "reserved_gib", "kv_cache_gib", "mamba_state_gib",
                                    "spec_state_gib", "free_gib"}
    assert data["fits"] is True and data["per_gpu"]["weights_gib"] == pytest.approx(57.95, abs=0.05)
    (model / "config.json").write_text("{not json")
    out = subprocess.run([sys.executable, "-m", "console", "fit", str(model), "--gpus", "4", "--gpu-mem", "95"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and "not JSON" in out.stderr and "Traceback" not in out.stderr


def test_unknown_weights_cannot_tell(tmp_path: Path) -> None:
    """A directory with only config.json: not FITS with 0 GiB of weights, but "cannot tell"."""
    r = plan_fit(FitInputs(qwen122b_config(), None, 4, 95.59, tp=4))
    assert r.fits is None and r.verdict == "cannot tell" and "cannot tell" in r.binding_constraint
    assert "CANNOT TELL" in format_fit(r).plain and "FITS" not in format_fit(r).plain.replace("CANNOT TELL", "")
    model = tmp_path / "only-config"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(qwen122b_config()))
    out = subprocess.run([sys.executable, "-m", "console", "fit", str(model), "--gpus", "4", "--gpu-mem", "95.59",
                          "--json"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and json.loads(out.stdout)["fits"] is None
    assert json.loads(out.stdout)["verdict"] == "cannot tell"
    # weights that do not fit even at 0 GiB still say so
    assert plan_fit(FitInputs(qwen122b_config(), None, 1, 95.59, tp=4)).fits is False


def test_does_not_fit_shows_the_card_and_exits_3(tmp_path: Path) -> None:
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(qwen122b_config()))
    (model / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": W122}}))
    out = subprocess.run([sys.executable, "-m", "console", "fit", str(model), "--gpus", "2", "--gpu-mem", "96"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 3, out.stderr
    assert "DOES NOT FIT" in out.stdout and "96.0 GiB card" in out.stdout and "129.0 GiB" not in out.stdout
    assert "exceed" in out.stdout


def test_a_repo_id_without_the_hub_fails_fast_with_a_hint(tmp_path: Path) -> None:
    import os

    from console.demo.sshd import free_port

    env = {**os.environ, "HF_ENDPOINT": f"http://127.0.0.1:{free_port()}", "HF_HOME": str(tmp_path / "hf")}
    out = subprocess.run([sys.executable, "-m", "console", "fit", "Qwen/Qwen3.5-122B-A10B", "--gpus", "4",
                          "--gpu-mem", "96"], capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 1 and "Traceback" not in out.stderr
    # "not reachable" comes from the CLI's own check of the endpoint, made before huggingface_hub
    # (which alone retried for ~24 s) is called: the fast path, without a wall-clock bound (issue 27).
    assert "not reachable" in out.stderr and "local model directory" in out.stderr and "--host" in out.stderr


def test_the_comparison_table_has_headers() -> None:
    r = plan_fit(FitInputs(qwen122b_config(), W122, 4, 95.59, tp=4))
    text = format_fit(r, [("weights / GPU", "57.95 GiB", "58.03 GiB")]).plain
    header = text.split("predicted vs the server's log\n", 1)[1].splitlines()[0]
    assert header.split() == ["figure", "predicted", "server", "log"]


def test_an_fp8_kv_cache_halves_each_tokens_bytes_and_the_fit_shows_about_twice_the_tokens() -> None:
    """`--kv-cache-dtype fp8_e4m3` on the new unit's command: one byte per K/V element instead of the
    checkpoint's bf16 two (SGLang's kv_cache_dtype); the same memory holds about twice the tokens."""
    from console.domain.analysis.fit import inputs_from_command
    from console.host.parsers.sglang_argv import normalize

    def planned(*flags: str) -> object:
        cmd = normalize(["python", "-m", "sglang.launch_server", "--model-path", "/m", "--tp-size", "4", *flags])
        return plan_fit(inputs_from_command(cmd, qwen122b_config(), W122, 8, 139.8))

    auto, fp8 = planned(), planned("--kv-cache-dtype", "fp8_e4m3")
    assert (auto.kv_bytes_per_token, fp8.kv_bytes_per_token) == (12_288, 6_144)  # type: ignore[attr-defined]
    assert fp8.max_total_tokens == pytest.approx(2 * auto.max_total_tokens, rel=0.01)  # type: ignore[attr-defined]
    wide = plan_fit(FitInputs(qwen122b_config(), W122, 8, 139.8, tp=4, kv_cache_dtype="float32"))
    assert wide.kv_bytes_per_token == 24_576
