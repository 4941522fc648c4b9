"""The GPU source and pane: recorded H200 output, the simulated host's three paths, bad input."""

from __future__ import annotations

import json

import pytest

from console.demo.hostsim import HostSimulator, story
from console.model import GpuStatus, Reading
from console.ui.panes.gpu import format_gpu_status
from console.host.parsers.nvidia_smi import parse_compute_apps, parse_gpu_csv
from console.host.parsers.nvml import gpus_from_sample, parse_sampler_line
from console.host.sources.gpu import PATHS, GpuSource
from console.host.transport.ssh import SshTransport
from tests.kit.hosts import DATA, sim_options

H200 = DATA / "h200"


def test_recorded_h200_query_parses_exactly() -> None:
    parsed = parse_gpu_csv((H200 / "nvidia_smi_query_gpu.txt").read_text())
    assert parsed.problems == ()
    (gpu,) = parsed.gpus
    assert (gpu.index, gpu.name, gpu.memory_used_mib, gpu.memory_total_mib) == (0, "NVIDIA H200", 41579, 143771)
    assert (gpu.utilization_pct, gpu.temperature_c, gpu.power_limit_w) == (0, 40, 700.0)
    assert gpu.uuid == "GPU-1081cd7b-52eb-fd89-c0b1-ba91b23923dd"


def test_recorded_h200_processes_attach_to_their_gpu() -> None:
    by_uuid, problems = parse_compute_apps((H200 / "nvidia_smi_apps.txt").read_text())
    assert problems == ()
    (proc,) = by_uuid["GPU-1081cd7b-52eb-fd89-c0b1-ba91b23923dd"]
    assert (proc.pid, proc.name, proc.memory_mib) == (458, "/opt/torch/.venv/bin/python3", 41570)


def test_empty_compute_apps_is_no_processes_not_an_error() -> None:
    assert parse_compute_apps("") == ({}, ())


def test_recorded_lms_stream_is_one_line_per_sample() -> None:
    parsed = parse_gpu_csv((H200 / "nvidia_smi_lms.txt").read_text())
    assert len(parsed.gpus) >= 3 and {g.index for g in parsed.gpus} == {0}


def test_recorded_sampler_lines_match_nvidia_smi_within_rounding() -> None:
    lines = (H200 / "nvml_sampler.jsonl").read_text().splitlines()
    assert parse_sampler_line(lines[0]) == {"driver": "580.159.04", "count": 1}
    gpus, problems = gpus_from_sample(parse_sampler_line(lines[1]))
    assert problems == ()
    # Recorded before the sampler rounded like nvidia-smi: floor gave 41578 against 41579.
    assert abs((gpus[0].memory_used_mib or 0) - 41579) <= 1
    assert gpus[0].processes[0].pid == 458


def test_validation_report_shows_every_path_agreeing_with_nvidia_smi() -> None:
    report = json.loads((H200 / "validation.json").read_text())
    paths = {c["path"] for c in report["checks"]}
    assert paths == {"local", "ssh/nvml", "ssh/nvidia-smi-stream", "ssh/nvidia-smi"}
    assert all(c["ok"] and c["diff_mib"] <= 1 and c["holder_process_mib"] == 41570 for c in report["checks"])


@pytest.mark.parametrize("line, error", [
    ("0, NVIDIA H200, GPU-1, [GPU requires reset], [GPU requires reset], [GPU requires reset], "
     "[GPU requires reset], [GPU requires reset], [GPU requires reset]", "GPU requires reset"),
    ("1, NVIDIA H200, GPU-2, [Unknown Error], 143771, [Unknown Error], [Unknown Error], "
     "[Unknown Error], 700.00", "Unknown Error"),
])
def test_a_gpu_in_trouble_is_kept_with_its_error(line: str, error: str) -> None:
    """Hand-written from nvidia-smi's documented wording (no such GPU was at hand)."""
    healthy = "2, NVIDIA H200, GPU-3, 100, 143771, 5, 33, 80.00, 700.00"
    parsed = parse_gpu_csv(line + "\n" + healthy + "\n")
    assert [g.error for g in parsed.gpus] == [error, None]
    assert parsed.gpus[1].memory_used_mib == 100


def test_garbled_truncated_and_free_text_lines_become_problems() -> None:
    text = ("Unable to determine the device handle for GPU0000:3B:00.0: Unknown Error\n"
            "0, NVIDIA H200, GPU-1, 41579, 143771, 0, 40, 119.84, 700.00\n"
            "1, NVIDIA H2\n"
            "\x00\xff garbage\n")
    parsed = parse_gpu_csv(text)
    assert [g.index for g in parsed.gpus] == [0]
    assert len(parsed.problems) == 3 and parsed.problems[0].startswith("line 1: Unable")


def test_mig_mode_na_fields_are_none() -> None:
    """Under MIG, utilization is [N/A] (hand-written from nvidia-smi's documented output)."""
    parsed = parse_gpu_csv("0, NVIDIA H200, GPU-1, 2048, 143771, [N/A], 35, 90.00, [N/A]\n")
    gpu = parsed.gpus[0]
    assert (gpu.utilization_pct, gpu.power_limit_w, gpu.error) == (None, None, None)
    text = format_gpu_status(Reading("gpu", GpuStatus("nvidia-smi", parsed.gpus), 1.0), 56, 12).plain
    assert "  –%" in text


@pytest.mark.parametrize("path", PATHS)
async def test_each_path_reads_the_simulated_gpus_over_ssh(sim: HostSimulator, path: str) -> None:
    transport = SshTransport(sim_options(sim))
    await transport.connect()
    try:
        source = GpuSource(transport, local=False, interval_s=0.2)
        source.unavailable.update({p: "test" for p in PATHS if p != path})
        reading = await source.first_reading(20)
        assert reading.data is not None, reading.error
        assert reading.data.source == path
        expect = story.gpu_states(0.0)
        assert len(reading.data.gpus) == story.GPU_COUNT
        for gpu, sim_gpu in zip(reading.data.gpus, expect, strict=True):
            assert gpu.memory_total_mib == story.GPU_TOTAL_MIB
            assert abs((gpu.memory_used_mib or 0) - sim_gpu.used_mib) < 200
            assert gpu.processes and gpu.processes[0].name.startswith("sglang::scheduler_TP")
    finally:
        await transport.close()


async def test_falls_back_to_nvidia_smi_when_the_host_has_no_pynvml(sim: HostSimulator) -> None:
    (sim.root / ".sim" / "pylib" / "pynvml.py").unlink()
    transport = SshTransport(sim_options(sim))
    await transport.connect()
    try:
        source = GpuSource(transport, local=False, interval_s=0.2)
        reading = await source.first_reading(20)
        assert reading.data is not None and reading.data.source == "nvidia-smi-stream"
        assert "nvml" in source.unavailable and "pynvml" in source.unavailable["nvml"]
        text = format_gpu_status(reading, 100, 20).plain
        assert "via nvidia-smi-stream" in text and "nvml: pynvml is not importable" in text
    finally:
        await transport.close()


async def test_no_driver_at_all_is_a_clear_error_not_a_crash(sim: HostSimulator) -> None:
    (sim.root / ".sim" / "pylib" / "pynvml.py").unlink()
    (sim.bin_dir / "nvidia-smi").unlink()
    transport = SshTransport(sim_options(sim))
    await transport.connect()
    try:
        source = GpuSource(transport, local=False, interval_s=0.2)
        reading = await source.first_reading(20)
        assert reading.data is None
        assert reading.error and reading.error.startswith("no way to read the GPUs")
        assert "nvidia-smi" in reading.error
        assert "no way to read the GPUs" in format_gpu_status(reading, 56, 12).plain
    finally:
        await transport.close()


def _status(n: int) -> Reading[GpuStatus]:
    gpus = tuple(parse_gpu_csv("\n".join(
        f"{i}, NVIDIA H200, GPU-{i}, {40000 + i}, 143771, {10 * i}, {40 + i}, 300.00, 700.00" for i in range(n)
    )).gpus)
    return Reading("gpu", GpuStatus("nvml", gpus, memory_history=((0.2, 0.4),) * n), 1.0)


@pytest.mark.parametrize("width", [30, 36, 56, 60, 100, 116])
def test_every_line_fits_the_pane(width: int) -> None:
    for line in format_gpu_status(_status(8), width, 14).plain.splitlines():
        assert len(line) <= width, line


def test_eight_gpus_and_a_total_fit_at_120x40() -> None:
    """Half of 120 columns, 14 rows: every GPU row and the total are visible."""
    text = format_gpu_status(_status(8), 56, 14).plain
    lines = text.splitlines()
    assert sum(1 for line in lines if line[:3].strip().isdigit()) == 8
    total = next(line for line in lines if line.startswith(" Σ"))
    assert "312.5 / 1123.2 GiB" in total  # 320,028 MiB over 8 × 143,771 MiB and "via nvml" in total


def test_nvidia_smi_na_fields_are_unknown_and_infinite_readings_are_no_readings() -> None:
    """Hand-made lines in nvidia-smi's documented shapes (tests/data/PROVENANCE.md: a uuid of N/A):
    not a value; `inf`/`nan` are no readings either, so the pane shows them unknown."""
    from console.host.parsers.nvidia_smi import parse_gpu_line

    gpu = parse_gpu_line("0, NVIDIA H200, N/A, 41579, 143771, 87, 54, inf, nan")
    assert gpu is not None
    assert (gpu.uuid, gpu.power_w, gpu.power_limit_w) == (None, None, None)
    assert (gpu.memory_used_mib, gpu.memory_total_mib, gpu.utilization_pct) == (41579, 143771, 87)
    real = parse_gpu_line("0, NVIDIA H200, GPU-3f1c, 41579, 143771, 87, 54, 512.33, 700.00")
    assert real is not None and (real.uuid, real.power_w) == ("GPU-3f1c", 512.33)
