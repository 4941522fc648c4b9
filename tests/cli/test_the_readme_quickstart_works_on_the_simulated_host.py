"""The README's "Quickstart on a real host", followed word by word against the simulated host run as
its own process (an SSH server on loopback): the profile copied from configs/seeds-host.toml and
edited as the comment says (host, user, paths; here also the simulator's port, key and known_hosts),
`doctor` checking what its comment promises, the console opening the five panes with the profile, and
the same console from the command line alone. Each command is read from the README, not restated."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _quickstart() -> list[str]:
    text = (ROOT / "README.md").read_text()
    block = text.split("## Quickstart on a real host", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    return [line.split("  #", 1)[0].strip() for line in block.strip().splitlines()]


@pytest.fixture
def simulated_host():
    proc = subprocess.Popen([sys.executable, "-m", "console.demo.hostsim.process", "--scenario", "swap"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert proc.stdout is not None
        yield json.loads(proc.stdout.readline())["profile"]
    finally:
        assert proc.stdin is not None
        proc.stdin.close()  # the simulator stops when its stdin closes
        proc.wait(60)


def _gpuconsole(command: str, extra: list[str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    argv = shlex.split(command)
    assert argv[0] == ".venv/bin/gpuconsole", command
    return subprocess.run([sys.executable, "-m", "console", *argv[1:], *extra], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, stdin=subprocess.DEVNULL,
                          env={**os.environ, "GPUCONSOLE_CONFIG": ""})


def test_the_readme_quickstart_works_on_the_simulated_host(simulated_host, tmp_path: Path) -> None:
    sim = simulated_host
    root = sim["model_dir"].split("/shared/")[0]  # the simulated host's / (a sandbox)
    install, profile_step, doctor, console, direct = _quickstart()
    assert install.startswith("python3 -m venv .venv")  # done: this suite runs in it

    # 2. the profile, copied as written, then edited: "edit host, user, paths"
    subprocess.run(["bash", "-c", profile_step], check=True, cwd=ROOT, timeout=30)
    config = Path(os.environ["XDG_CONFIG_HOME"]) / "gpuconsole" / "config.toml"
    text = config.read_text()
    text = re.sub(r'(?m)^host = ".*"$', f'host = "{sim["host"]}"\nport = {sim["port"]}\n'
                  f'identity = "{sim["identity"]}"\nknown_hosts = "{sim["known_hosts"]}"', text)
    text = re.sub(r'(?m)^user = ".*"$', f'user = "{sim["user"]}"', text)
    text = text.replace('"/shared/', f'"{root}/shared/').replace('["/data"]', f'["{root}/data"]')
    text = text.replace('["/shared", "/"]', f'["{root}/shared", "{root}"]')
    text = re.sub(r"(?m)^server_port = \d+$", f"server_port = {sim['server_port']}", text)
    config.write_text(text)

    # 3. doctor: "SSH works, nvidia-smi, journalctl, the server's port"
    out = _gpuconsole(doctor, [])
    assert out.returncode == 0, out.stdout + out.stderr
    checks = {line.split()[1]: line for line in out.stdout.splitlines() if line.startswith("  ok ") or
              line.startswith("  FAIL")}
    for name in ("ssh", "nvidia-smi", "journalctl", "server"):
        assert name in checks and checks[name].startswith("  ok "), (name, out.stdout)
    assert f":{sim['server_port']}" in checks["server"] and "/health" in checks["server"], checks["server"]
    for unit in ("sglang-qwen122b.service", "sglang-qwen397b.service"):
        assert any(f"unit {unit}" in line and line.startswith("  ok ") for line in out.stdout.splitlines()), \
            (unit, out.stdout)

    # 4. the console, with the profile: its five panes on the simulated host
    shot = tmp_path / "profile.svg"
    out = _gpuconsole(console, ["--no-record", "--screenshot", str(shot), "--screenshot-after", "8"])
    assert out.returncode == 0 and shot.exists(), out.stderr[-800:]
    svg = shot.read_text()
    for pane in ("GPUs", "Download", "Service", "SGLang", "Benchmark", "sglang-qwen397b.service"):
        assert pane in svg, pane

    # 5. the same without a profile: the README's options, with the simulated host's values
    line = direct.replace("10.1.230.174", sim["host"]).replace("/shared/", f"{root}/shared/")
    line += (f" --port {sim['port']} --identity {sim['identity']} --known-hosts {sim['known_hosts']}"
             f" --server-port {sim['server_port']}")
    config.unlink()
    shot = tmp_path / "direct.svg"
    out = _gpuconsole(line, ["--no-record", "--screenshot", str(shot), "--screenshot-after", "8"])
    assert out.returncode == 0 and shot.exists(), out.stderr[-800:]
    assert "sglang-qwen397b.service" in shot.read_text() and "Qwen3.5-122B-A10B" in shot.read_text()
