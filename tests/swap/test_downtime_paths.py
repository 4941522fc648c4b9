"""Issue 24: the path with the least downtime (in place, beside, restart), the restart's prediction
from this host's boots, and the pre-warm's exact commands."""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path

import pytest

from console.domain.analysis.fit import FitInputs
from console.demo.hostsim.downloader import qwen122b_config
from console.model import GpuDevice, GpuProcess, GpuStatus
from console.host.parsers.sglang_log import parse_line
from console.domain.swap import paths, prediction, prewarm
from console.domain.swap.actions import ActionError
from tests.kit.downtime import boot_lines as _boot_lines

GIB = 1 << 30


def _cfg() -> dict:
    return copy.deepcopy(qwen122b_config())


# -- 1. in place: one differing field is never in place --------------------------------------------
CHANGES = {
    "architectures": ("", ["Qwen3_5ForConditionalGeneration"]),
    "model_type": ("", "qwen3_5"),
    "num_hidden_layers": ("text_config", 60),
    "hidden_size": ("text_config", 4096),
    "intermediate_size": ("text_config", 12288),
    "num_attention_heads": ("text_config", 64),
    "num_key_value_heads": ("text_config", 4),
    "head_dim": ("text_config", 128),
    "num_experts": ("text_config", 512),
    "num_experts_per_tok": ("text_config", 10),
    "moe_intermediate_size": ("text_config", 512),
    "shared_expert_intermediate_size": ("text_config", 512),
    "vocab_size": ("text_config", 151936),
    "quantization_config": ("", {"quant_method": "modelopt", "quant_algo": "NVFP4"}),
    "dtype": ("", "float16"),
    "full_attention_interval": ("text_config", 2),
    "linear_num_value_heads": ("text_config", 32),
    "linear_key_head_dim": ("text_config", 64),
    "mtp_num_hidden_layers": ("text_config", 0),
    "tie_word_embeddings": ("", True),
}


def test_every_compared_field_is_tested() -> None:
    # A field added to ARCH_FIELDS without a test below is a field nobody checked.
    untested = set(paths.ARCH_FIELDS) - set(CHANGES) - {
        "num_local_experts", "n_routed_experts", "layer_types", "linear_num_key_heads", "linear_value_head_dim",
        "linear_conv_kernel_dim", "kv_lora_rank", "q_lora_rank", "qk_rope_head_dim", "v_head_dim",
        "first_k_dense_replace"}
    assert not untested


@pytest.mark.parametrize("name", sorted(CHANGES))
def test_one_field_differing_is_never_in_place(name: str) -> None:
    where, value = CHANGES[name]
    new = _cfg()
    (new[where] if where else new)[name] = value
    if name == "dtype":
        new["text_config"]["dtype"] = value
    opt = paths.in_place_option(_cfg(), new)
    assert opt.possible is False
    assert [d.name for d in opt.differing_fields] == [name]
    assert name in opt.reason and "architecture differs" in opt.reason


@pytest.mark.parametrize("name", ["linear_num_key_heads", "linear_value_head_dim", "linear_conv_kernel_dim",
                                  "layer_types", "num_local_experts", "kv_lora_rank"])
def test_a_field_present_in_one_config_only_differs(name: str) -> None:
    new = _cfg()
    new["text_config"][name] = 7 if name != "layer_types" else ["full_attention"] * 48
    if name in new["text_config"] and name in _cfg()["text_config"]:
        new["text_config"][name] = _cfg()["text_config"][name] + 1
    assert not paths.in_place_option(_cfg(), new).possible


def test_torch_dtype_and_dtype_are_one_field() -> None:
    old, new = _cfg(), _cfg()
    del new["dtype"], new["text_config"]["dtype"]
    new["torch_dtype"] = "bfloat16"
    assert paths.in_place_option(old, new).possible
    new["torch_dtype"] = "float16"
    assert [d.name for d in paths.in_place_option(old, new).differing_fields] == ["dtype"]


def test_same_architecture_is_in_place_and_says_what_happens_on_failure() -> None:
    opt = paths.in_place_option(_cfg(), _cfg(), ["--model-path", "--served-model-name"], pause_s=12.0)
    assert opt.possible and opt.predicted_downtime_s == 12.0
    text = " ".join(opt.details)
    assert "old weights keep serving" in text.replace("keeps the old weights serving", "old weights keep serving")
    assert "rollback by restart" in text and "installed (not restarted)" in text


def test_a_flag_other_than_the_weights_needs_a_restart() -> None:
    opt = paths.in_place_option(_cfg(), _cfg(), ["--model-path", "--tp-size"])
    assert not opt.possible and "--tp-size" in opt.reason


def test_unknown_configs_are_not_in_place() -> None:
    assert "served model's config.json is not known" in paths.in_place_option(None, _cfg()).reason
    assert not paths.in_place_option(_cfg(), None).possible


# -- 1. beside: the fit planner on the GPUs the old server does not use ------------------------------
def _gpus(n: int, used: tuple[int, ...], total_mib: int = 143_771) -> GpuStatus:
    devs = []
    for i in range(n):
        procs = (GpuProcess(41_200 + i, f"sglang::scheduler_TP{i}", 120_000),) if i in used else ()
        devs.append(GpuDevice(i, "NVIDIA H200", None, 121_000 if i in used else 0, total_mib, 50, 40, 300.0, 700.0,
                              procs))
    return GpuStatus("nvidia-smi", tuple(devs))


def _fit_inputs(tp: int = 4) -> FitInputs:
    return FitInputs(_cfg(), 250_000_000_000, tp, 140.0, tp=tp, speculative_algorithm="NEXTN",
                     speculative_num_draft_tokens=4, mem_fraction_static=0.9)


def test_beside_on_an_eight_gpu_host_where_the_old_server_uses_four() -> None:
    opt = paths.beside_option(_fit_inputs(), _gpus(8, (0, 1, 2, 3)), old_pids=[41_200], old_port=30000)
    assert opt.possible and opt.predicted_downtime_s == 0.0
    assert opt.gpus == (4, 5, 6, 7) and opt.cuda_visible_devices == "4,5,6,7" and opt.port == 30001
    assert any("switches clients from port 30000 to 30001" in d for d in opt.details)
    routed = paths.beside_option(_fit_inputs(), _gpus(8, (0, 1, 2, 3)), old_port=30000, router="http://r:30080")
    assert any("add the new worker, drain and remove the old one" in d for d in routed.details)


def test_beside_refused_without_free_gpus_names_them() -> None:
    opt = paths.beside_option(_fit_inputs(), _gpus(4, (0, 1, 2, 3)), old_pids=[41_200], old_port=30000)
    assert not opt.possible
    assert "no free GPUs: the new server needs 4, 0 free" in opt.reason and "(the old server)" in opt.reason


def test_beside_refused_when_it_does_not_fit_on_the_free_gpus() -> None:
    opt = paths.beside_option(_fit_inputs(tp=2), _gpus(8, (0, 1, 2, 3, 4, 5), total_mib=48_000), old_port=30000)
    assert not opt.possible and "does not fit on GPUs 6,7" in opt.reason


def test_a_gpu_with_memory_held_but_no_process_is_not_free() -> None:
    status = _gpus(8, (0, 1, 2, 3))
    held = status.gpus[4].__class__(**{**{f: getattr(status.gpus[4], f) for f in status.gpus[4].__slots__},
                                       "memory_used_mib": 30_000})
    status = GpuStatus("nvidia-smi", status.gpus[:4] + (held,) + status.gpus[5:])
    free, busy = paths.free_gpus(status)
    assert free == [5, 6, 7] and any("GPU 4: 30000 MiB" in b for b in busy)


# -- 1. the choice ----------------------------------------------------------------------------------
def test_the_plan_picks_the_least_downtime_and_says_why_not_the_faster() -> None:
    diff = _cfg()
    diff["text_config"]["num_hidden_layers"] = 60
    ip = paths.in_place_option(_cfg(), diff)
    bs = paths.beside_option(_fit_inputs(), _gpus(4, (0, 1, 2, 3)), old_port=30000)
    rs = paths.restart_option(110.0, "restart: predicted downtime 1m50s: …")
    plan = paths.choose(ip, bs, rs)
    assert plan.chosen == "restart"
    lines = plan.lines()
    assert lines[0].startswith("restart: predicted downtime 1m50s")
    assert any(ln.startswith("in-place: not possible: architecture differs (num_hidden_layers)") for ln in lines)
    assert any(ln.startswith("beside: not possible: no free GPUs") for ln in lines)
    same = paths.choose(paths.in_place_option(_cfg(), _cfg(), pause_s=9), bs, rs)
    assert same.chosen == "in-place"
    with pytest.raises(ValueError, match="beside is not possible: no free GPUs"):
        paths.choose(ip, bs, rs, want="beside")
    assert json.loads(json.dumps(plan.to_json()))["chosen"] == "restart"


def test_boots_from_the_log_lines_give_the_rate_and_phases() -> None:
    (boot,) = prediction.boots_from_events(parse_line(ln) for ln in _boot_lines())
    assert boot.tp == 4 and boot.weights_s == 119.0 and boot.graphs_s == 12.0
    assert boot.kv_s == 2.0 and boot.init_s == 4.0 and boot.ready_s == 3.0
    assert boot.weights_gbps == pytest.approx(58.21 * GIB * 4 / 1e9 / 119.0)


def test_a_boot_that_never_got_ready_is_no_sample() -> None:
    lines = _boot_lines()[:-1]
    assert prediction.boots_from_events(parse_line(ln) for ln in lines) == []


def test_the_prediction_reads_like_the_gate_says_it() -> None:
    boots = [b for s in ("2026-12-01 08:00:", "2026-12-01 09:00:", "2026-12-01 10:00:")
             for b in prediction.boots_from_events(parse_line(ln) for ln in _boot_lines(s))]
    res = prediction.Residency(0, 250 * 10**9, 39)
    p = prediction.predict_restart(boots, 250e9, res)
    rate = 58.21 * GIB * 4 / 1e9 / 119.0
    assert p.total_s == pytest.approx(prediction.ASSUMED_STOP_S + 250 / rate + 2 + 12 + 4 + 3)  # + the stop, assumed
    assert p.text.startswith(f"restart: predicted downtime {paths.format_duration(p.total_s)}: stop and drain 1 s, "
                             "250 GB weights at "
                             f"{rate:.1f} GB/s from disk, 0 % in page cache, graphs 12 s — from 3 earlier boots "
                             "on this host")
    warm = prediction.predict_restart(boots, 250e9, prediction.Residency(125 * 10**9, 250 * 10**9, 39))
    assert warm.phases["weights"] < p.phases["weights"]
    assert any("page-cache read rate" in a for a in warm.assumptions)
    # Each rate named where it applies: half from disk, half at the page cache's rate (before, a warm
    # prediction named only the disk's rate, though the cache's made most of the figure)
    assert (f"250 GB weights 50% at {rate:.1f} GB/s from disk, 50% at {warm.cache_gbps:.1f} GB/s from the page "
            "cache (50 % in page cache)") in warm.text, warm.text
    hot = prediction.predict_restart(boots, 250e9, prediction.Residency(250 * 10**9, 250 * 10**9, 39), cache_gbps=96.0)
    assert "250 GB weights at 96.0 GB/s from the page cache (100 % in page cache)" in hot.text, hot.text
    assert "from disk" not in hot.text


def test_no_fincore_is_unknown_and_said_so() -> None:
    res = prediction.parse_fincore("NO_FINCORE\n", 250 * 10**9, 127)
    assert res.fraction is None and "no fincore" in res.text()
    boots = prediction.boots_from_events(parse_line(ln) for ln in _boot_lines())
    p = prediction.predict_restart(boots, 250e9, res)
    assert any("residency unknown" in a and "no fincore" in a for a in p.assumptions)
    assert "page cache unknown" in p.text


def test_no_boot_recorded_is_an_unknown_prediction() -> None:
    p = prediction.predict_restart([], 250e9, None)
    assert p.total_s is None and "no earlier boot" in p.text


def test_fincore_output_is_summed() -> None:
    text = "  6442450944 6442450944 /m/model-00001-of-00002.safetensors\n0 6500000000 /m/model-00002-of-00002.safetensors\n"
    res = prediction.parse_fincore(text, 12_942_450_944)
    assert res.files == 2 and res.resident_bytes == 6442450944
    assert res.text() == "50 % in page cache"


def test_boots_are_read_from_recordings(tmp_path: Path) -> None:
    from console.core.recording import Recorder
    from console.core.state import HostState, LogAppended

    state = HostState("h")
    rec = Recorder(state, tmp_path).start()
    state.apply(LogAppended("h", tuple(parse_line(ln) for ln in _boot_lines())))
    rec.close()
    samples, problems = prediction.samples_from_recordings(tmp_path)
    assert len(samples) == 1 and samples[0].weights_s == 119.0 and problems == []


# -- 3. the pre-warm: its exact commands ------------------------------------------------------------
def test_prewarm_commands_are_quoted_bounded_and_idle_priority() -> None:
    a = prewarm.prewarm("/shared/models/Qwen 3.5", ["model-00001-of-00002.safetensors", "x'y.safetensors"],
                        12 * 10**9, rate_mbps=500, margin_gib=16)
    (cmd,) = a.commands
    assert "setsid nohup timeout -k 5 " in cmd.script
    assert "'/shared/models/Qwen 3.5/.cache/gpuconsole'" in cmd.script
    lines = "\n".join(a.display())
    assert "nice -n 19" in lines and "ionice -c 3" in lines and "stat -c %s --" in lines
    assert "MemAvailable" in lines and "margin=17179869184" in lines and "rate=500000000" in lines
    assert "≤ 500 MB/s" in a.waits_for and "16 GiB" in a.waits_for


@pytest.mark.parametrize("bad", ["../etc/shadow", "a/b.safetensors", "", ".."])
def test_prewarm_refuses_names_outside_the_model_dir(bad: str) -> None:
    with pytest.raises(ActionError):
        prewarm.prewarm("/shared/m", [bad], 1)


def test_prewarm_refuses_a_relative_model_dir() -> None:
    with pytest.raises(ActionError):
        prewarm.prewarm("shared/m", ["a.safetensors"], 1)


def _run_script(tmp_path: Path, avail: int) -> subprocess.CompletedProcess[str]:
    """The reader itself, run by sh against a fake `free` (MemAvailable as given) and real dd."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    free = bin_dir / "free"
    free.write_text("#!/bin/sh\necho '               total        used        free      shared  buff/cache   available'\n"
                    f"echo 'Mem:    1000000000000 1 1 1 1 {avail}'\n")
    free.chmod(0o755)
    shards = []
    for i in range(2):
        f = tmp_path / f"s{i}.safetensors"
        f.write_bytes(b"\0" * (3 << 20))
        shards.append(str(f))
    body = prewarm.script(shards, 6 << 20, rate_mbps=10_000, margin_gib=1, chunk_mib=2)
    import os

    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    return subprocess.run(["sh", "-c", body], capture_output=True, text=True, env=env, timeout=60)


def test_prewarm_script_reads_every_chunk_with_progress(tmp_path: Path) -> None:
    r = _run_script(tmp_path, 64 << 30)
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    assert out[-1] == f"prewarm: done {6 << 20} bytes"
    assert f"prewarm: {2 << 20}/{6 << 20} bytes" in out and f"prewarm: {3 << 20}/{6 << 20} bytes" in out
    p = prewarm.parse_progress("stopped\n" + out[-1], 6 << 20)
    assert p.finished and "100 %" in p.text()


def test_prewarm_stops_when_memavailable_falls_below_the_margin(tmp_path: Path) -> None:
    r = _run_script(tmp_path, 512 << 20)
    assert r.returncode == prewarm.EXIT_LOW_MEMORY
    last = r.stdout.splitlines()[-1]
    assert last.startswith("prewarm: stopped: MemAvailable 536870912 B is below the margin")
    p = prewarm.parse_progress("stopped\n" + last, 6 << 20)
    assert not p.finished and "MemAvailable" in (p.stopped_reason or "")
    two = prewarm.parse_progress(f"stopped\nprewarm: {2 << 20}/{6 << 20} bytes\n{last}", 6 << 20)
    assert two.done_bytes == 2 << 20 and "stopped at 0 GB (33 %)" in two.text()


def test_fincore_command_is_bounded_and_says_when_missing() -> None:
    cmd = prewarm.fincore_command(["/m/a b.safetensors"])
    assert "NO_FINCORE" in cmd and "timeout -k 5 60 fincore --bytes --noheadings --output RES,SIZE,FILE -- " \
                                  "'/m/a b.safetensors'" in cmd


def test_a_boot_after_a_plan_carries_its_page_cache_residency(tmp_path: Path) -> None:
    from console.core.recording import Recorder
    from console.core.state import HostState, LogAppended
    from console.core.derive.downtime import PathEvent

    state = HostState("h")
    rec = Recorder(state, tmp_path).start()
    state.apply(LogAppended("h", tuple(parse_line(ln) for ln in _boot_lines("2026-12-01 08:00:"))))
    state.apply(PathEvent("h", "plan", json.dumps({"residency": {"fraction": 1.0}}), 1.0))
    state.apply(LogAppended("h", tuple(parse_line(ln) for ln in _boot_lines("2026-12-01 09:00:", weights_s=10.0))))
    state.apply(LogAppended("h", tuple(parse_line(ln) for ln in _boot_lines("2026-12-01 10:00:"))))
    rec.close()
    samples, _ = prediction.samples_from_recordings(tmp_path)
    assert [s.cached_fraction for s in samples] == [None, 1.0, None]
    warm = prediction.predict_restart(samples, 250e9, prediction.Residency(250 * 10**9, 250 * 10**9, 39))
    rate = 58.21 * GIB * 4 / 1e9 / 10.0  # the warm boot's own rate
    assert warm.phases["weights"] == pytest.approx(250 / rate)
    assert not any("page-cache read rate" in a for a in warm.assumptions)


@pytest.mark.parametrize(("key", "value", "message"), [
    ("swap_path", "sideways", "must be in-place, beside or restart"),
    ("router_url", "http://x:1/; rm -rf /", "must be a URL"),
    ("router_url", 5, "must be a string"),
])
def test_the_profile_refuses_a_bad_path_or_router(tmp_path: Path, key: str, value: object, message: str) -> None:
    from console.config import ConfigError, _profile_from_table

    with pytest.raises(ConfigError, match=message):
        _profile_from_table("p", {key: value}, tmp_path / "config.toml")
    ok = _profile_from_table("p", {"swap_path": "beside", "router_url": "http://127.0.0.1:30080"}, tmp_path / "c")
    assert ok.swap_path == "beside" and ok.router_url == "http://127.0.0.1:30080"
