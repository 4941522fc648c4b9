"""A deployment session recorded and replayed (issue 37), with the host recordings' own codec.

A deployment recording is a directory under the recordings dir, `deploy-NAME-STAMP/` (0700):

    deployment.json     the nodes (key, role, node rank, profile, host, server port), as the share's
                        manifest names them
    KEY/*.jsonl.gz      each node's HostState recorded by console/core/recording.py's Recorder (a whole
                        state first, then every event: the node's readings, log lines, the deployment
                        swap's approvals and audited commands)
    probes.jsonl        each round of the nodes' probes: {"t": the console's clock, "probes": {KEY: …}}
    swaps.jsonl         each deployment swap's report when it ended: {"t", "outcome", "report"}

`ReplayWatch` plays it back: one Replayer per node on the recording's clock, the probes and the
reports as they were at that moment, and the deployment screen built on it shows the deployment as it
was (the same derive over the same events). Nothing here runs on a host.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import time
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

from console.config import HostProfile
from console.core.recording import Recorder, RecordingError, Replayer, default_dir, read_recording
from console.core.state import HostInfo, HostState
from console.domain.deploy.checks import Check, run_checks
from console.domain.deploy.probe import NodeProbe
from console.domain.deploy.profile import Deployment, DeploymentNode
from console.domain.deploy.state import DeploymentView, derive

FORMAT = "gpuconsole-deployment"
VERSION = 1
MAX_SIDE_LINES = 100_000  # probes.jsonl / swaps.jsonl lines read at most (a file anyone can hand over)


class ManifestError(ValueError):
    """Not a deployment manifest, or one this version cannot read (one line)."""


def manifest(deployment: Deployment, probes: dict[str, NodeProbe] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "format": FORMAT, "version": VERSION, "name": deployment.name, "kind": deployment.kind,
        "may_differ": list(deployment.may_differ),
        "nodes": [{"key": n.key, "role": n.role, "node_rank": n.node_rank, "profile": n.profile.name,
                   "host": n.profile.host, "server_port": n.profile.server_port} for n in deployment.nodes]}
    if probes is not None:
        out["probes"] = {k: asdict(v) for k, v in probes.items()}
    return out


def probes_from(data: Any) -> dict[str, NodeProbe]:
    known = {f.name for f in fields(NodeProbe)}
    return {str(k): NodeProbe(**{f: v for f, v in p.items() if f in known})
            for k, p in (data or {}).items() if isinstance(p, dict) and "at_s" in p}


def deployment_from_manifest(data: Any) -> tuple[Deployment, dict[str, NodeProbe]]:
    """The deployment a manifest names (hosts as names only: nothing is connected from it) and the
    probes it carries; ManifestError when it is not one."""
    if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("version") != VERSION \
            or not isinstance(data.get("nodes"), list):
        raise ManifestError("not a gpuconsole deployment manifest (or another version's)")
    try:
        nodes = tuple(DeploymentNode(HostProfile(str(n["profile"])[:100],
                                                 str(n["host"])[:200] if n.get("host") else None,
                                                 server_port=int(n.get("server_port") or 30000)),
                                     str(n["role"]), int(n["node_rank"])) for n in data["nodes"])
        deployment = Deployment(str(data["name"])[:100], str(data["kind"]), nodes,
                                tuple(str(f) for f in data.get("may_differ") or ()))
        probes = probes_from(data.get("probes"))
    except (KeyError, TypeError, ValueError) as exc:
        raise ManifestError(f"the deployment manifest is damaged: {exc}") from None
    return deployment, probes


def write_private(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(data, fh)
    tmp.replace(path)


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("._") or "deployment"


class DeploymentRecorder:
    """Records a watched deployment: a Recorder per node, and the probes and swap reports beside."""

    def __init__(self, watch: Any, directory: Path | None = None) -> None:
        self.watch = watch
        name = _safe(watch.deployment.name)
        self.directory = directory or default_dir() / f"deploy-{name}-{time.strftime('%Y%m%d-%H%M%S')}"
        self.recorders: dict[str, Recorder] = {}
        self.failed: str | None = None

    def _clock(self) -> float:
        state = next(iter(self.watch.states.values()), None)
        return state.now() if state is not None else time.time()

    def start(self) -> DeploymentRecorder:
        try:
            self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            write_private(self.directory / "deployment.json", manifest(self.watch.deployment))
        except OSError as exc:
            self.failed = f"cannot record the deployment in {self.directory}: {exc}"
            return self
        for key, state in self.watch.states.items():
            self.recorders[key] = Recorder(state, self.directory / _safe(key)).start()
        self.watch.on_probes.append(self.probes)
        return self

    def _append(self, name: str, record: dict[str, Any]) -> None:
        if self.failed is not None:
            return
        try:
            fd = os.open(self.directory / name, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            with os.fdopen(fd, "a", encoding="utf-8") as fh:
                fh.write(json.dumps({"t": self._clock(), **record}) + "\n")
        except OSError as exc:  # a full disk stops the side files; the console goes on
            self.failed = f"cannot append to {self.directory / name}: {exc}"

    def probes(self, probes: dict[str, NodeProbe]) -> None:
        self._append("probes.jsonl", {"probes": {k: asdict(v) for k, v in probes.items()}})

    def swap_ended(self, outcome: str, report: str) -> None:
        self._append("swaps.jsonl", {"outcome": outcome, "report": report})

    def close(self) -> None:
        with contextlib.suppress(ValueError):
            self.watch.on_probes.remove(self.probes)
        for recorder in self.recorders.values():
            recorder.close()


def _side_lines(path: Path) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    with contextlib.suppress(FileNotFoundError), open(path, encoding="utf-8", errors="replace") as fh:
        for i, line in enumerate(fh):
            if i >= MAX_SIDE_LINES:
                break
            with contextlib.suppress(ValueError):
                item = json.loads(line)
                if isinstance(item, dict) and isinstance(item.get("t"), (int, float)):
                    out.append(item)
    return out


def is_deployment_recording(path: Path) -> bool:
    return path.is_dir() and (path / "deployment.json").is_file()


class ReplayWatch:
    """The deployment screen's watch over a deployment recording, on the recording's clock."""

    def __init__(self, directory: Path, *, speed: float = 1.0, at_s: float = 0.0) -> None:
        self.audit_file: Path | None = None  # a replay runs nothing: no audit log of its own
        try:
            data = json.loads((directory / "deployment.json").read_text())
        except (OSError, ValueError) as exc:
            raise RecordingError(f"{directory}: not a deployment recording ({exc})") from None
        try:
            self.deployment, _ = deployment_from_manifest(data)
        except ManifestError as exc:
            raise RecordingError(f"{directory}: {exc}") from None
        self.directory = directory
        self.on_probes: list[Any] = []
        self.replayers: dict[str, Replayer] = {}
        self._states: dict[str, HostState] = {}
        for n in self.deployment.nodes:
            files = sorted((directory / _safe(n.key)).glob("*.jsonl.gz"))
            if not files:
                continue  # a node never recorded: its state is unknown on screen, never guessed
            recording = read_recording(files[0])
            header = recording.header
            state = HostState(str(header.get("host") or n.key), label=str(header.get("label") or n.key),
                              demo=bool(header.get("demo")))
            self._states[n.key] = state
            self.replayers[n.key] = Replayer(recording, state, speed=speed, at_s=at_s)
        if not self.replayers:
            raise RecordingError(f"{directory}: no node's recording in it")
        starts = [r.recording.started_at for r in self.replayers.values()]
        self.started_at = min(starts)
        self.at_s = at_s
        self._probes = _side_lines(directory / "probes.jsonl")
        self._swaps = _side_lines(directory / "swaps.jsonl")
        for r in self.replayers.values():  # the state at --at before the screen is built
            r.seek(at_s)
            if r.state.info == HostInfo(r.state.host, r.state.label, r.state.demo):
                for _, event in r.recording.entries[:5]:
                    if isinstance(event, HostInfo):
                        r.state.apply(event)
                        break
        self._tasks: list[asyncio.Task[Any]] = []

    @property
    def states(self) -> dict[str, HostState]:
        return self._states

    def now(self) -> float:
        return max(r.now() for r in self.replayers.values())

    @property
    def probes(self) -> dict[str, NodeProbe]:
        now = self.now()
        last = [p for p in self._probes if p["t"] <= now]
        return probes_from(last[-1].get("probes")) if last else {}

    def report(self) -> str | None:
        """The last deployment swap report written by now (None: none yet)."""
        now = self.now()
        done = [s for s in self._swaps if s["t"] <= now and isinstance(s.get("report"), str)]
        return str(done[-1]["report"]) if done else None

    def transport(self, key: str) -> None:
        return None

    async def start(self) -> None:
        if not self._tasks:
            self._tasks = [asyncio.ensure_future(r.run()) for r in self.replayers.values()]

    async def probe_all(self) -> dict[str, NodeProbe]:
        return self.probes

    def view(self, now_s: float | None = None) -> DeploymentView:
        return derive(self.deployment, self.states, self.probes, self.now() if now_s is None else now_s)

    def checks(self) -> tuple[Check, ...]:
        return run_checks(self.deployment, self.states, self.probes)

    def apply_until(self, at_s: float) -> None:
        """Every node's state at `at_s` seconds in, at once (tests, reports)."""
        for r in self.replayers.values():
            r.apply_until(at_s)

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(BaseException):
                await task
