"""One poll through the persistent shell, the kill-on-host guarantee kept two ways, in one run:

- `watchdog` (now): one watchdog per shell (bash `read -t` on a fifo) kills what overruns;
  the poll forks once, for its subshell;
- `wrapper` (main at d2e6719, and the fallback on a host without bash): every command under
  coreutils' `timeout -k` in its own process group (two more fork+execs per poll).

Each sample is `gpuconsole doctor --json` (its `rtt_ms.persistent.p50`, `--runs` polls of
`true`) against OpenSSH's sshd on 127.0.0.1 (`console.demo.sshd.start_sshd`, the tests' fixture),
the two modes alternating round by round so that load from other processes falls on both. The
wrapper mode is chosen by taking bash away from the shell's setup (`WATCHDOG_SHELL`), in a
process of its own, so the doctor is the real CLI either way.

    .venv/bin/python benchmarks/poll_rtt.py --rounds 5 --runs 200
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from console.demo.sshd import start_sshd  # noqa: E402

DOCTOR = """
import sys
import console.host.transport.shell as shell
if sys.argv[1] == "wrapper":
    shell.WATCHDOG_SHELL = "gc-no-such-bash"  # the setup finds no bash: `timeout -k` per command
from console.cli.main import main
raise SystemExit(main(sys.argv[2:]))
"""


def loadavg() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def doctor(mode: str, sshd: object, runs: int, home: str) -> dict[str, float]:
    s = sshd  # console.demo.sshd.Sshd
    argv = ["doctor", "--json", "--runs", str(runs), "--host", "127.0.0.1", "--port", str(s.port),  # type: ignore[attr-defined]
            "--user", s.user, "--identity", str(s.client_key), "--known-hosts", str(s.known_hosts)]  # type: ignore[attr-defined]
    env = {**os.environ, "HOME": home, "XDG_CONFIG_HOME": f"{home}/.config", "XDG_DATA_HOME": f"{home}/.local/share",
           "XDG_STATE_HOME": f"{home}/.local/state", "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", DOCTOR, mode, *argv], capture_output=True, text=True, env=env,
                         timeout=300)
    if out.returncode != 0:
        raise SystemExit(f"doctor failed ({mode}): {out.stderr.strip()[-500:]}")
    report = json.loads(out.stdout)
    return report["rtt_ms"]["persistent"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5, help="rounds; each runs the doctor once per mode")
    ap.add_argument("--runs", type=int, default=200, help="polls per doctor run (its --runs)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    home = tempfile.mkdtemp(prefix="gpuconsole-pollrtt-")
    sshd = start_sshd()
    samples: dict[str, list[dict[str, float]]] = {"watchdog": [], "wrapper": []}
    loads: list[float] = []
    try:
        for i in range(a.rounds):
            order = ("watchdog", "wrapper") if i % 2 == 0 else ("wrapper", "watchdog")
            for mode in order:
                loads.append(loadavg())
                samples[mode].append(doctor(mode, sshd, a.runs, home))
    finally:
        sshd.stop()
    result = {
        mode: {"p50_ms_median": round(statistics.median(x["p50"] for x in xs), 3),
               "p50_ms_runs": [x["p50"] for x in xs], "p95_ms_runs": [x["p95"] for x in xs]}
        for mode, xs in samples.items()
    }
    result["ratio_wrapper_over_watchdog"] = round(
        result["wrapper"]["p50_ms_median"] / result["watchdog"]["p50_ms_median"], 2)
    result["load_average"] = {"min": min(loads), "max": max(loads)}
    result["command"] = f"benchmarks/poll_rtt.py --rounds {a.rounds} --runs {a.runs}"
    if a.json:
        print(json.dumps(result, indent=2))
        return
    print(f"one poll (`true`) through the persistent shell, OpenSSH sshd on 127.0.0.1, gpuconsole doctor --json "
          f"--runs {a.runs}, {a.rounds} rounds alternating; load average {min(loads):.2f}-{max(loads):.2f}")
    for mode in ("watchdog", "wrapper"):
        r = result[mode]
        print(f"  {mode:<9} rtt_ms.persistent.p50 median {r['p50_ms_median']:.3f} ms  runs {r['p50_ms_runs']}"
              f"  p95 runs {r['p95_ms_runs']}")
    print(f"  wrapper / watchdog: {result['ratio_wrapper_over_watchdog']}x")


if __name__ == "__main__":
    main()
