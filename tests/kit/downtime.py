"""Shared test kit: moved from test_downtime_approval.py so that no test imports another test module."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from console.core.state import HostState
from console.demo.swap_demo import render_all, run_path_demo
from console.domain.paths import host_named
from console.domain.swap import paths as P
from console.domain.swap import port_free
from console.domain.swap.controller import SwapController
from console.host.transport import LocalTransport
from console.host.transport.base import CommandResult

ROUTER = "http://127.0.0.1:30100"

# /proc/net/tcp as the kernel prints it: only the old server listens (127.0.0.1:30000, 0x7530).
TCP_HEADER = ("  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n")
TCP_FREE = TCP_HEADER + ("   0: 0100007F:7530 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000  0 1 1\n"
                         "listeners_exit=0\n")

ANSWERS = [
    ("/proc/net/tcp", TCP_FREE),  # the beside port: nothing listens there
    ("update_weights_from_disk", '{"success": true, "message": "Succeeded to update model weights.", '
                                 '"num_paused_requests": 2}\n200'),
    ("add_worker", '{"status": "ok"}\n200'),
    ("remove_worker", '{"status": "ok"}\n200'),
    ("/metrics", "sglang:num_running_reqs 0\n"),
    ("/health", "200"),
    ("systemctl show", "ActiveState=active\nSubState=running\nMainPID=42\n"),
    ("prewarm.log", "stopped\nprewarm: done 100 bytes\n"),
]


@dataclass
class Scripted:
    """Answers each command by the first pattern it contains; records every command run."""

    answers: list[tuple[str, str]]
    ran: list[str] = field(default_factory=list)
    label: str = "h"

    async def run(self, script: str, timeout: float = 30) -> CommandResult:
        self.ran.append(script)
        for pattern, out in self.answers:
            if pattern in script:
                return CommandResult(0, out.encode(), b"", 0.01)
        return CommandResult(0, b"", b"", 0.01)


def controller(*, approval: bool = True) -> tuple[SwapController, Scripted, HostState]:
    state = HostState("h")
    transport = Scripted(list(ANSWERS))
    profile = SimpleNamespace(require_approval=approval, read_only=False, model_dir="/m/new", repo_id="o/new",
                              compare_unit="old.service", unit="new.service", server_port=30000, swap_path=None,
                              router_url=ROUTER, forbidden_prefixes=(), verify_sha=False, ready_timeout_s=30.0,
                              drain_timeout_s=30.0)
    notices: list[tuple[str, str]] = []
    runner = SimpleNamespace(state=state, host="h", session=SimpleNamespace(profile=profile, transport=transport),
                             notice=lambda title, text, severity="information": notices.append((title, text)),
                             _spawn=lambda coro, name: asyncio.get_running_loop().create_task(coro),
                             repoll=lambda name: None, start_bench=lambda kind, plan=None: "no bench here")
    ctl = SwapController(runner, who="ana")
    ctl.poll_s = 0.01
    ctl.audit_file = None
    return ctl, transport, state


def plan(chosen: str) -> P.PathPlan:
    in_place = P.PathOption("in-place", chosen == "in-place", 10.0 if chosen == "in-place" else None, "same")
    beside = P.PathOption("beside", chosen == "beside", 0.0 if chosen == "beside" else None, "fits",
                          gpus=(4, 5, 6, 7), port=30001)
    return P.PathPlan((in_place, beside, P.PathOption("restart", True, 100.0, "stop, then start")), chosen)


# -- 2. the restart prediction from this host's boots ------------------------------------------------
def boot_lines(start: str = "2026-12-01 08:00:", weights_s: float = 119.0, tp: int = 4) -> list[str]:
    def at(s: int) -> str:
        m, s = divmod(s, 60)
        return f"{start[:-3]}{int(start[-3:-1]) + m:02d}:{s:02d}"

    w = int(weights_s)
    out = [f"[{at(0)} TP0] server_args=ServerArgs(model_path='/m', tp_size={tp})"]
    for r in range(tp):
        out.append(f"[{at(4)} TP{r}] Load weight begin. avail mem=139.10 GB")
    for r in range(tp):
        out.append(f"[{at(4 + w)} TP{r}] Load weight end. elapsed={weights_s:.2f} s, type=Qwen3_5MoeForConditional"
                   f"Generation, avail mem=80.00 GB, mem usage=58.21 GB.")
    out.append(f"[{at(6 + w)} TP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 3700000, K size: 22.00 GB, "
               "V size: 22.00 GB")
    out.append(f"[{at(7 + w)} TP0] Capture target decode CUDA graph begin. backend=full, num_tokens_per_req=4, "
               "avail mem=8.00 GB")
    out.append(f"[{at(19 + w)} TP0] Capture target decode CUDA graph end. bs=[1, 2], elapsed=12.00 s, "
               "mem usage=1.58 GB, avail mem=6.42 GB.")
    out.append(f"[{at(22 + w)}] The server is fired up and ready to roll!")
    return out


# -- what the simulated host recorded of a swap (its journal, its servers' lifecycle files) ----------
STAMP = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?)")


@dataclass
class SimHost:
    """What the simulated host recorded of the swap: the journal's lines (time, message) per unit."""

    path: str
    work: Path
    old: str
    new: str

    def journal(self, unit: str) -> list[tuple[float, str]]:
        path = self.work / "host" / ".sim" / "journal" / f"{unit}.jsonl"
        return [(int(e["__REALTIME_TIMESTAMP"]) / 1e6, e["MESSAGE"])
                for e in map(json.loads, path.read_text().splitlines())]

    def systemd(self, unit: str, verb: str) -> float:
        """The last time systemd said `verb` ("Started", "Stopping") of `unit`."""
        return [t for t, m in self.journal(unit) if m.startswith(f"{verb} {unit}")][-1]

    def named(self, path: str) -> str:
        """`path` (a path of this machine under the simulated host's sandbox) as the host names it: the
        words of a report (console/domain/paths.py's host_named)."""
        return host_named(path, str(self.work / "host"))

    def container_log(self, name: str) -> list[tuple[float, str]]:
        """A container's output as `docker logs --timestamps` prints it: (Docker's time, the line)."""
        path = self.work / "host" / ".sim" / "containers" / f"{name}.log"
        out = []
        for line in path.read_text().splitlines():
            stamp, _, message = line.partition(" ")
            at = dt.datetime.fromisoformat(stamp[:26] + "+00:00").timestamp()
            out.append((at, message))
        return out

    def inspect(self, name: str) -> dict:
        """`docker inspect` of a container as the simulated Docker answers it."""
        return json.loads((self.work / "host" / ".sim" / "containers" / f"{name}.json").read_text())

    def started_at(self, name: str) -> float:
        """A container's last start as the simulated Docker recorded it (State.StartedAt, epoch seconds)."""
        return dt.datetime.fromisoformat(self.inspect(name)["State"]["StartedAt"][:26] + "+00:00").timestamp()

    def logged(self, unit: str, text: str) -> list[str]:
        """The server's own stamps of its lines containing `text` (a unit's journal; a container's
        `docker logs`)."""
        lines = self.journal(unit) if unit.endswith(".service") else self.container_log(unit)
        return [m.group(1) for _, msg in lines if text in msg and (m := STAMP.match(msg))]

    def logged_at(self, unit: str, text: str) -> list[float]:
        """The host's times of the server's lines containing `text`: journald's time of each entry (a
        unit's journal), Docker's (a container's `docker logs --timestamps`)."""
        lines = self.journal(unit) if unit.endswith(".service") else self.container_log(unit)
        return [at for at, msg in lines if text in msg and STAMP.match(msg)]

    def served_name(self, unit_file: Path) -> str:
        return re.search(r"--served-model-name (\S+)", unit_file.read_text()).group(1)

    def model_dir_on_host(self, name: str) -> tuple[str, str]:
        """The model directory a container serves, as a path on the host (its `--model-path` through
        its one bind mount), and the mount's source."""
        (bind,) = self.inspect(name)["HostConfig"]["Binds"]
        source, inside, _ = bind.split(":")
        args = self.inspect(name)["Args"]
        return args[args.index("--model-path") + 1].replace(inside, source, 1), source

    def served_as(self, name: str) -> str:
        """The model name a container serves under (its `--served-model-name`)."""
        args = self.inspect(name)["Args"]
        return args[args.index("--served-model-name") + 1]

    def bench_time(self, row: dict) -> float:
        """When the console's bench file (bench.jsonl) says the report's run `row` ran (its timestamp;
        the run found by its output throughput)."""
        runs = [json.loads(line) for line in (self.work / "bench.jsonl").read_text().splitlines()]
        (run,) = [x for x in runs if x["output_throughput"] == row["output_throughput"]]
        return float(run["timestamp"])

    def life(self, unit: str) -> dict:
        return json.loads((self.work / "host" / ".sim" / "lifecycle" / f"{unit}.json").read_text())

    def began(self) -> float:
        """When the host began to change: the update's begin (its first rank's line of the last update,
        at the host's time of the line), the new server's start, the old one's stop."""
        if self.path == "in-place":
            begins = self.logged_at(self.new, "Update engine weights online from disk begin")
            return min(t for t in begins if t >= begins[-1] - 1.0)
        return self.systemd(self.new, "Started") if self.path == "beside" else self.systemd(self.old, "Stopping")

    def ready(self) -> float:
        """The host's time of the line that made the new weights serve: the update's last "end" line (in
        place), the new server's ready line."""
        if self.path == "in-place":
            return self.logged_at(self.new, "Update weights end.")[-1]
        return self.logged_at(self.new, "The server is fired up")[-1]


# -- a path played once on the simulated host, for every test of a module that reads it ----------------
def play_path(factory: pytest.TempPathFactory, path: str, *, runtime: str = "systemd", speed: float = 16.0,
              steps: tuple[str, ...] | None = None, name: str | None = None,
              faults: dict[str, Any] | None = None,
              late_replies: dict[str, float] | None = None) -> tuple[Path, Any, dict, Path]:
    """`path` driven by the controller on its simulated host (`console.demo.swap_demo.run_path_demo`,
    the environment it sets restored after), its report rendered from the recording into OUT as
    NAME.md/.html/.json (NAME: "swap-report-PATH"): (the recording, the live state, the report's
    JSON, OUT). The simulated host's own records are under OUT's sibling "w" (`SimHost`).
    `late_replies`: a command containing this text answers the console that many seconds after the
    host ran it."""
    base = factory.mktemp(f"{runtime}-{path}")
    saved = dict(os.environ)
    try:
        rec, state = asyncio.run(run_path_demo(base / "out", path, speed=speed, work=base / "w", quiet=True,
                                               steps=steps, runtime=runtime, faults=faults,
                                               late_replies=late_replies))
    finally:
        os.environ.clear()
        os.environ.update(saved)
    name = name or f"swap-report-{path}"
    render_all(rec, base / "out", name)
    return rec, state, json.loads((base / "out" / f"{name}.json").read_text()), base / "out"


def assert_the_console_ran_a_container_paths_steps(r: dict, state: Any) -> dict[str, dict]:
    """A container path's report: every step done by ana's console or skipped (none seen outside it),
    the unit stop and start skipped for the container's own steps; the report's steps by key."""
    steps = {s["key"]: s for s in r["steps"]}
    assert all(s["state"] in ("done", "skipped") for s in r["steps"]), \
        [(s["key"], s["state"], s.get("detail")) for s in r["steps"]]
    assert all(s["who"] == "ana" for s in r["steps"] if s["state"] == "done")
    assert not any(s.observed for s in state.swap.steps.values())
    for key in ("stop_old", "start_new"):
        assert steps[key]["state"] == "skipped" and "container" in steps[key]["detail"]
    return steps


def report_headline(md: str) -> list[str]:
    """The report's headline lines (its bold bullets above "## Host"), Markdown escapes removed."""
    return [line.removeprefix("- **").removesuffix("**").replace("\\", "")
            for line in md.split("## Host")[0].splitlines() if line.startswith("- **")]


async def kernel_port_rows(port: int) -> str:
    """What the beside step's port check (its own command) reads of this machine's kernel tables."""
    t = LocalTransport()
    try:
        r = await t.run(port_free.port_check(port), timeout=20)
    finally:
        await t.close()
    return r.text


def operators_shell(swap: Any, state: Any) -> tuple[str, str, str, Any]:
    """After the console's beside step: (the router's URL, the new server's, the old one's, a shell on
    the host whose commands are the operator's: another terminal, nothing audited)."""
    step = state.swap.steps["beside"]
    assert step.state == "done", f"{step.state}: {step.detail}"
    return (swap.fast.router_url.rstrip("/"), f"http://127.0.0.1:{swap.fast.plan.chosen_option.port}",
            f"http://127.0.0.1:{swap.fast.old_port}", swap.runner.session.transport)

