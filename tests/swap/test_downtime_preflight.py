"""Issue 24 item 2: the gate shows the path and its predicted downtime before anything ran. The
preflight plans the paths itself from the host's read-only facts (both config.json, the shards'
sizes, fincore, this host's recorded boots, the GPU reading) when nobody ran the `paths` step,
and says why the faster paths were not possible; a swap run as one action then follows the path
that plan chose.

Unit level: the SwapController over a scripted transport, recordings written here (no simulator)."""

from __future__ import annotations

import asyncio
import copy
import json
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from console.domain.analysis.service_report import ServiceReport, ServiceSide
from console.core.recording import Recorder
from console.core.state import HostState, LogAppended, ReadingChanged
from console.demo.hostsim.downloader import qwen122b_config
from console.model import GpuDevice, GpuProcess, GpuStatus, Reading
from console.host.parsers.sglang_argv import normalize
from console.host.parsers.sglang_log import parse_line
from console.domain.swap import preflight
from console.domain.swap.controller import SwapController
from console.core.derive.swap_view import SwapStep, SwapStepChanged
from tests.kit.downtime import Scripted
from tests.kit.downtime import boot_lines as _boot_lines

SHARD = 125_000_000_000
ARGV = ["/usr/bin/python3", "-m", "sglang.launch_server", "--model-path", "{}", "--tp", "4", "--port", "30000"]


class Host(Scripted):
    def __init__(self, old_cfg: dict[str, Any], new_cfg: dict[str, Any]) -> None:
        names = [f"model-0000{i}-of-00002.safetensors" for i in (1, 2)]
        super().__init__([
            ("-name '*.safetensors'", "".join(f"{SHARD} {n}\n" for n in names)),
            ("fincore", "".join(f"0 {SHARD} /m/new/{n}\n" for n in names)),
            ("update_weights_from_disk", '{"success": true, "message": "ok", "num_paused_requests": 0}\n200'),
        ])
        self.files = {"/m/old/config.json": json.dumps(old_cfg), "/m/new/config.json": json.dumps(new_cfg)}

    async def read_file(self, path: str, *, max_bytes: int = 1 << 20, timeout: float = 10.0) -> bytes:
        self.ran.append(f"read {path}")
        return self.files[path].encode()


def _gpus() -> GpuStatus:
    return GpuStatus("nvidia-smi", tuple(
        GpuDevice(i, "NVIDIA H200", None, 121_000, 143_771, 50, 40, 300.0, 700.0,
                  (GpuProcess(41_200 + i, f"sglang::scheduler_TP{i}", 120_000),)) for i in range(4)))


def _setup(tmp_path: Path, *, same: bool) -> tuple[SwapController, Host, HostState]:
    old_cfg = qwen122b_config()
    new_cfg = copy.deepcopy(old_cfg)
    if not same:
        new_cfg["text_config"]["num_hidden_layers"] = 60
    recordings = tmp_path / "recordings"
    past = HostState("h")
    rec = Recorder(past, recordings).start()
    for start in ("2026-11-28 08:00:", "2026-11-29 09:00:", "2026-11-30 10:00:"):  # three earlier boots
        past.apply(LogAppended("h", tuple(parse_line(ln) for ln in _boot_lines(start))))
    rec.close()
    draft = tmp_path / "new.service"
    draft.write_text("[Service]\nExecStart=" + " ".join(ARGV).format("/m/new") + "\n")
    state = HostState("h")
    transport = Host(old_cfg, new_cfg)
    profile = SimpleNamespace(require_approval=False, read_only=False, model_dir="/m/new", repo_id="o/new",
                              compare_unit="old.service", unit="new.service", server_port=30000, swap_path=None,
                              router_url=None, forbidden_prefixes=(), verify_sha=False, ready_timeout_s=30.0,
                              unit_draft=str(draft))
    runner = SimpleNamespace(state=state, host="h", session=SimpleNamespace(profile=profile, transport=transport),
                             notice=lambda *a, **k: None, repoll=lambda name: None,
                             _spawn=lambda coro, name: asyncio.get_running_loop().create_task(coro),
                             start_bench=lambda kind, plan=None: "no benchmark in this test")
    ctl = SwapController(runner, who="ana")
    ctl.poll_s = 0.01
    ctl.audit_file = None
    ctl.fast.recordings_dir = recordings
    now = time.time()
    old = ServiceSide("old.service", None, None, normalize([a.format("/m/old") for a in ARGV]), active_state="active")
    new = ServiceSide("new.service", None, None, normalize([a.format("/m/new") for a in ARGV]), active_state="inactive")
    report = ServiceReport(old, new, (), (), (), (), None, (), (), "test", ())
    state.apply(ReadingChanged("h", "service", Reading("service", report, now)))
    state.apply(ReadingChanged("h", "gpu", Reading("gpu", _gpus(), now)))
    state.apply(ReadingChanged("h", "server", Reading("server", SimpleNamespace(status="ready", unit=None), now)))
    return ctl, transport, state


def _path_check(state: HostState) -> Any:
    return next(c for c in state.swap.gate if c.name == "swap path")


async def test_the_preflight_plans_and_the_gate_shows_the_prediction_before_anything_ran(tmp_path: Path) -> None:
    ctl, transport, state = _setup(tmp_path, same=False)
    why, preview = ctl.preview("preflight")
    assert preview is not None, why
    assert any("first the path is planned from the host's read-only facts" in ln for ln in preview.lines)
    assert ctl.request("preflight", "ana") is None
    await ctl.wait_idle(20)
    check = _path_check(state)
    assert check.ok is True
    text = check.reason
    assert text.startswith("restart: predicted downtime ")
    for part in ("250 GB weights at ", "GB/s from disk", "0 % in page cache", "graphs 12 s",
                 "from 3 earlier boots on this host", "in-place: not possible: architecture differs (num_hidden_layers)",
                 "beside: not possible: no free GPUs: the new server needs 4, 0 free"):
        assert part in text, (part, text)
    assert "paths" not in state.swap.steps or state.swap.steps["paths"].state == "pending"
    assert state.swap.paths["plan"].data()["plan"]["chosen"] == "restart"  # the report has it too
    # Read-only: only reads ran, nothing was started, stopped or written.
    assert not [c for c in transport.ran if "systemctl" in c or "curl" in c or "sftp" in c]
    assert ctl.fast.planned_by == "preflight"


async def test_a_swap_in_one_action_follows_the_path_the_preflight_chose(tmp_path: Path) -> None:
    ctl, transport, state = _setup(tmp_path, same=True)
    for key in ("download", "verify", "install"):
        state.apply(SwapStepChanged("h", SwapStep(key, key, state="done", ended_at_s=time.time() - 60)))
    for check in preflight.CHECKS:  # this test is about the path, not the other checks
        assert ctl.override(check, check, "ana") is None
    assert ctl.request("swap", "ana") is None
    await ctl.wait_idle(30)
    assert state.swap.steps["preflight"].state == "done", state.swap.steps["preflight"].detail
    assert _path_check(state).reason.startswith("in-place: predicted downtime ")
    assert state.swap.steps["in_place"].state == "done", state.swap.steps["in_place"].detail
    stop = state.swap.steps["stop_old"]  # the old server was never stopped: skipped, with why (issue 33)
    assert stop.state == "skipped" and stop.detail.startswith("in place: ") and stop.started_at_s is None
    assert any("update_weights_from_disk" in c for c in transport.ran)
    assert not any("systemctl stop" in c for c in transport.ran)


async def test_a_path_the_profile_asks_for_and_cannot_have_blocks_the_gate(tmp_path: Path) -> None:
    ctl, transport, state = _setup(tmp_path, same=False)
    ctl.fast.want = "in-place"
    assert ctl.request("preflight", "ana") is None
    await ctl.wait_idle(20)
    check = _path_check(state)
    assert check.ok is False and "in-place is not possible: architecture differs" in check.reason
    assert "the plan would choose restart" in check.reason
    assert state.swap.steps["preflight"].state == "refused"
