"""Wrong inputs that were silent (issue 35 item 8): each is one line on stderr and exit 2, or says
unknown where it does not know; never a console opened on something else."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from console.demo.hostsim.downloader import qwen122b_config


def _run(*args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "console", *args], capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def test_demo_hosts_zero_is_refused_not_this_machines_console() -> None:
    for n in ("0", "-3", "201"):
        out = _run("--demo-hosts", n, "--screenshot", "/dev/null", "--screenshot-after", "0.1")
        assert out.returncode == 2 and "--demo-hosts" in out.stderr and "1-200" in out.stderr, (n, out.stderr)
        assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr


def test_a_host_beside_demo_is_refused_not_ignored() -> None:
    out = _run("--host", "gpu-a", "--demo", "--screenshot", "/dev/null", "--screenshot-after", "0.1")
    assert out.returncode == 2 and "--host gpu-a" in out.stderr and "--demo" in out.stderr, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_fit_with_only_a_config_says_its_capacity_is_unknown(tmp_path: Path) -> None:
    model = tmp_path / "only-config"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(qwen122b_config()))
    out = _run("fit", str(model), "--gpus", "4", "--gpu-mem", "95.59")
    assert out.returncode == 0 and "CANNOT TELL" in out.stdout
    tokens = next(ln for ln in out.stdout.splitlines() if "max total tokens" in ln)
    requests = next(ln for ln in out.stdout.splitlines() if "max running requests" in ln)
    assert "unknown" in tokens and "unknown" in requests and not any(c.isdigit() for c in tokens + requests)
    kv = next(ln for ln in out.stdout.splitlines() if ln.strip().startswith("KV cache"))
    assert "unknown" in kv and "GiB" not in kv
    data = json.loads(_run("fit", str(model), "--gpus", "4", "--gpu-mem", "95.59", "--json").stdout)
    assert data["max_total_tokens"] is None and data["max_running_requests"] is None
    assert data["per_gpu"]["kv_cache_gib"] is None and data["verdict"] == "cannot tell"


def test_fit_demo_with_a_repo_id_reads_the_simulated_hosts_copy_not_a_temporary_path() -> None:
    out = _run("fit", "--demo", "Qwen/Qwen3.5-122B-A10B", timeout=120)
    assert out.returncode == 0 and "FITS" in out.stdout and "248.8 GB of weights" in out.stdout, out.stderr
    other = _run("fit", "--demo", "Qwen/Qwen3-8B", timeout=120)
    assert other.returncode == 1 and "/tmp" not in other.stderr and "Qwen/Qwen3.5-122B-A10B" in other.stderr
    assert len(other.stderr.strip().splitlines()) == 1


def test_leaving_the_demo_says_where_its_recording_went() -> None:
    """`q` (here SIGTERM, which ends the app as `q` does) left nothing said of the recording (issue 35 item 10)."""
    import os
    import signal
    import time

    proc = subprocess.Popen([sys.executable, "-m", "console", "--demo"], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "TERM": "dumb"})
    data = Path(os.environ["XDG_DATA_HOME"]) / "gpuconsole" / "recordings"
    deadline = time.monotonic() + 90
    # the app up and the host's sources recorded (the recorder flushes as the readings come)
    while time.monotonic() < deadline and not any(f.stat().st_size > 4096 for f in data.rglob("*.jsonl.gz")):
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    recorded = list(data.rglob("*.jsonl.gz"))
    assert len(recorded) == 1 and f"recorded in {recorded[0]}" in err, err[-500:]


def test_fit_with_only_a_config_sizes_no_pool_from_the_unknown_weights(tmp_path: Path) -> None:
    """The GDN state and speculative pools are what is left after the weights: with the weights
    unknown they are unknown too (it printed 38.39 GiB of GDN state from weights counted as 0)."""
    model = tmp_path / "only-config"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(qwen122b_config()))
    out = _run("fit", str(model), "--gpus", "4", "--gpu-mem", "95.59")
    gdn = next(ln for ln in out.stdout.splitlines() if ln.strip().startswith("GDN state (mamba pool)"))
    assert "unknown" in gdn and "GiB" not in gdn, gdn
    assert not [ln for ln in out.stdout.splitlines() if ln.strip().startswith("speculative") and "GiB" in ln]
