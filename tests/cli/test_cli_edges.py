"""Bad command-line input is refused at the edge: one clear line on stderr and exit 2, never a
traceback, never a silent exit 0 (issue 15, item 9)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

CONFIG = {"table": '[profiles]\nx = 5\n', "list": '[profiles]\nx = [1, 2]\n', "port": '[profiles.x]\nport = "22"\n'}


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("edges")
    out: dict[str, Path] = {"dir": d}
    for name, text in CONFIG.items():
        (d / f"{name}.toml").write_text(text)
        out[f"config_{name}"] = d / f"{name}.toml"
    (d / "plain").write_text("x")
    model = d / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"hidden_size": 64, "num_attention_heads": 4,
                                                   "num_hidden_layers": 2, "vocab_size": 100}))
    (model / "model.safetensors.index.json").mkdir()
    out["model_index_dir"] = model
    (d / "wrong_shape.json").write_text(json.dumps([{"conversations": ["a", "b"]}, {"conversations": [{"value": 3},
                                                                                                    {"value": []}]}]))
    (d / "binary.json").write_bytes(b"\xff\xfe\x00")
    (d / "unit0.service").write_text("[Service]\nExecStart=/usr/bin/python3 -m sglang.launch_server "
                                     "--model-path /m --tp-size 0\n")
    (d / "unit1.service").write_text("[Service]\nExecStart=/usr/bin/python3 -m sglang.launch_server --model-path /m\n")
    (d / "oneword").write_text("x" * 1_000_000)
    return out


def _run(args: list[str], timeout: float = 60, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run([sys.executable, "-m", "console", *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def usage_cases(f: dict[str, Path]) -> list[list[str]]:
    d = f["dir"]
    url = ["bench", "--url", "http://127.0.0.1:9"]
    return [
        ["--config", str(f["config_table"]), "doctor"],
        ["--config", str(f["config_list"]), "doctor"],
        ["--config", str(f["config_port"]), "--profile", "x", "doctor"],
        ["--port", "-1", "doctor"], ["--port", "70000", "doctor"], ["--port", "x", "doctor"],
        ["--server-port", "70000", "snapshot"], ["--server-port", "0", "snapshot"],
        ["--connect-timeout", "-3", "doctor"],
        [*url, "--sweep", "1,x"], [*url, "--sweep", "0,4"], [*url, "--sweep", ""],
        [*url, "--num-prompts", "0"], [*url, "--num-prompts", "-5"], [*url, "--concurrency", "0"],
        [*url, "--request-rate", "-1"], [*url, "--request-rate", "0"], [*url, "--input-len", "-1"],
        [*url, "--output-len", "0"], [*url, "--range-ratio", "2"], [*url, "--duration", "-1"],
        [*url, "--warmup", "-1"],
        [*url, "--dataset", str(d / "wrong_shape.json")], [*url, "--dataset", str(d / "binary.json")],
        [*url, "--dataset", str(d / "missing.json")],
        [*url, "--output-file", "/proc/no/such/dir/b.jsonl"], [*url, "--output-file", str(d)],
        ["fit", str(f["model_index_dir"]), "--gpus", "0", "--gpu-mem", "80"],
        ["fit", str(f["model_index_dir"]), "--gpus", "8", "--gpu-mem", "80", "--tp", "0"],
        ["fit", str(f["model_index_dir"]), "--gpus", "8", "--gpu-mem", "-80"],
        ["fit", str(f["model_index_dir"]), "--gpus", "8", "--gpu-mem", "80", "--mem-fraction", "5"],
        ["fit", str(f["model_index_dir"]), "--gpus", "8", "--gpu-mem", "80", "--context-len", "0"],
        ["--screenshot", str(d / "shot.svg"), "--screenshot-size", "abc", "--demo"],
        ["--screenshot", str(d / "shot.svg"), "--screenshot-size", "0x0", "--demo"],
        ["--screenshot", str(d / "shot.svg"), "--screenshot-after", "0", "--demo"],
        ["--screenshot", str(d / "missing-dir" / "shot.svg"), "--demo"],
        ["snapshot", "--log-file", str(d / "missing.log")],
        ["snapshot", "--log-file", str(d)],
        ["snapshot", "--model-dir", str(f["dir"] / "plain")],
        ["doctor", "--runs", "0"],
        ["--web", "127.0.0.1:9", "serve", "--demo"],  # the deployment's --web before a command: not ignored
        ["--demo-speed", "0", "doctor"],
    ]


def test_every_bad_input_is_one_line_and_exit_2(files: dict[str, Path]) -> None:
    bad = []
    for args in usage_cases(files):
        try:
            r = _run(args, timeout=30)
        except subprocess.TimeoutExpired:
            bad.append((args[-4:], "timed out", ""))
            continue
        lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
        if r.returncode != 2 or len(lines) != 1 or "Traceback" in r.stderr or not lines[0].startswith("gpuconsole"):
            bad.append((args[-4:], r.returncode, r.stderr[-300:]))
    from tests.kit.figures import record

    record("bad command-line inputs (one line, exit 2)", tried=len(usage_cases(files)), failed=len(bad))
    assert bad == []


def test_an_index_that_is_a_directory_is_a_message(files: dict[str, Path]) -> None:
    r = _run(["fit", str(files["model_index_dir"]), "--gpus", "8", "--gpu-mem", "80", "--json"])
    assert "Traceback" not in r.stderr and r.returncode in (0, 1), r.stderr
    if r.returncode == 0:
        assert "weight size unknown" in r.stdout or "index" in r.stdout


def test_tp_size_zero_in_a_unit_is_a_lint_not_a_crash(files: dict[str, Path]) -> None:
    d = files["dir"]
    r = _run(["diff", str(d / "unit1.service"), str(d / "unit0.service"), "--json"])
    assert "Traceback" not in r.stderr and r.returncode in (0, 1, 3), r.stderr
    json.loads(r.stdout)


def test_diff_of_a_one_word_megabyte_file_answers(files: dict[str, Path]) -> None:
    """How long it takes is benchmarks/clocks.py's (linear, not quadratic); here: it answers, in JSON."""
    d = files["dir"]
    r = _run(["diff", str(d / "unit1.service"), str(d / "oneword"), "--json"], timeout=120)
    assert "Traceback" not in r.stderr and r.returncode in (0, 1, 3), r.stderr
    assert isinstance(json.loads(r.stdout), dict)


def test_a_huge_integer_in_bench_history_does_not_stop_the_app(tmp_path: Path) -> None:
    data = tmp_path / "data" / "gpuconsole"
    data.mkdir(parents=True)
    (data / "bench.jsonl").write_text('{"model": "m", "completed": ' + "9" * 5000 + "}\n{\"model\": \"m\"}\n")
    r = _run(["--demo", "--screenshot", str(tmp_path / "s.svg"), "--screenshot-after", "2"], timeout=120,
             env={"XDG_DATA_HOME": str(tmp_path / "data")})
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-500:]


def test_tp_size_zero_with_a_model_config_is_an_error_lint() -> None:
    from console.domain.analysis.service_diff import HostFacts
    from console.domain.analysis.service_report import build_report, side_from_text

    new = side_from_text("b", "[Service]\nExecStart=/usr/bin/python3 -m sglang.launch_server --model-path /m "
                              "--tp-size 0\n")
    report = build_report(None, new, HostFacts(model_config={"num_attention_heads": 32}, gpu_count=8))
    assert any(x.severity == "error" and "at least 1" in x.message for x in report.lints)
