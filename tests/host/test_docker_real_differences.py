"""What the real Docker does that the documentation-based fakes did not (issue 32), and the
hostile-container items of issue 34 (1, 8): the console read on the real CLI's own output,
recorded by tests/real/test_docker_outputs.py into tests/data/real/ (versions and command beside)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from console.demo.hostsim.fake_docker import add_container, append_log
from console.domain.analysis.container_diff import container_changes
from console.domain.swap import container_steps
from console.domain.swap.container_plan import ContainerPlan
from console.host.parsers.docker import ContainerRow, compose_container_on_host, parse_compose, parse_inspect, parse_ps
from console.host.sources.container import ComposeLogFollower, ContainerWatcher, container_script
from console.host.sources.log import LogFollower
from tests.kit.docker import inspect as _inspect

REAL = Path(__file__).parent.parent / "data" / "real"


def _real(key: str) -> dict[str, Any]:
    entry: dict[str, Any] = json.loads((REAL / f"docker_{key}.json").read_text())
    return entry


# -- ports, ps, shared memory -------------------------------------------------------------------------
def test_a_host_network_containers_discarded_port_bindings_are_not_shown_as_its_ports() -> None:
    recorded = _real("inspect_host_network_ports")
    assert json.loads(recorded["stdout"])[0]["HostConfig"]["PortBindings"]  # Docker kept them
    [spec] = parse_inspect(recorded["stdout"])
    assert spec.network_mode == "host" and spec.ports == ()


def test_the_service_poll_asks_docker_ps_only_for_the_fields_it_reads_not_every_containers_size() -> None:
    script = container_script(["sglang-new"])
    assert "{{json .}}" not in script and ".Size" not in script
    # The real CLI's answer to the console's template (both CLIs) reads as the full JSON line does
    for cli in ("cli28", "cli20"):
        ours = {r.name: r for r in parse_ps(_real(f"ps_template_{cli}")["stdout"])}
        full = {r.name: r for r in parse_ps(_real(f"ps_json_{cli}")["stdout"])}
        assert ours and ours.keys() == full.keys()
        assert all((ours[n].id, ours[n].command, ours[n].state, ours[n].labels) ==
                   (full[n].id, full[n].command, full[n].state, full[n].labels) for n in ours)


def test_a_compose_service_without_shm_size_against_a_container_with_dockers_default_is_no_change() -> None:
    [container] = parse_inspect(_real("inspect_host_network_ports")["stdout"])
    assert container.shm_size_bytes == 64 * 1024**2 and container.ipc_mode == "private"  # what Docker sets
    service = parse_compose("services:\n  s:\n    image: x\n    command: ['true']\n", "s")
    flags = {c.flag: c for c in container_changes(container, service)}
    assert "shm-size" not in flags and "ipc" not in flags, flags
    bigger = parse_compose("services:\n  s:\n    image: x\n    shm_size: 32g\n    ipc: host\n", "s")
    flags = {c.flag: c for c in container_changes(container, bigger)}
    assert flags["shm-size"].new == "32 GiB" and flags["ipc"].new == "host"


# -- the swap's install and start on the real CLI's words -----------------------------------------------
class _Ctl:
    def __init__(self, outputs: list[SimpleNamespace]) -> None:
        self.profile = SimpleNamespace(container="sglang-new", compare_container="sglang-old", compose=None,
                                       require_approval=False)
        side = SimpleNamespace(text="image: lmsysorg/sglang:v0.5.23-cu129\n", error=None, name="sglang-new")
        self.state = SimpleNamespace(data=lambda name: SimpleNamespace(new=side) if name == "service" else None)
        self.runner = SimpleNamespace(repoll=lambda name: None)
        self.outputs = outputs
        self.ran: list[str] = []
        self.containers = ContainerPlan(self)  # type: ignore[arg-type]

    def _set(self, key: str, **changes: Any) -> None:
        pass

    async def _run(self, who: str, key: str, cmd: Any) -> SimpleNamespace:
        self.ran.append(cmd.script)
        return self.outputs.pop(0)


def _ok(text: str = "") -> SimpleNamespace:
    return SimpleNamespace(ok=True, exit_status=0, text=text, error_text="")


async def test_a_crash_looping_new_container_is_not_called_already_running_at_install() -> None:
    from console.domain.swap.controller import StepFailed

    state_line = _real("inspect_state_restarting")["stdout"]  # "restarting true 1 N false"
    assert state_line.split()[:2] == ["restarting", "true"]
    ctl = _Ctl([_ok("sha256:abc\n"), _ok(state_line)])
    with pytest.raises(StepFailed) as failed:
        await container_steps.run_install(ctl, "alice")  # type: ignore[arg-type]
    said = str(failed.value)
    assert "already running" not in said
    assert "restarting in a loop" in said and "last exit code 1" in said
    # Read in the second it is up again between two crashes: running, with Docker's restart count
    ctl = _Ctl([_ok("sha256:abc\n"), _ok("running true 0 2 false\n")])
    with pytest.raises(StepFailed) as failed:
        await container_steps.run_install(ctl, "alice")  # type: ignore[arg-type]
    assert "already running" not in str(failed.value) and "after 2 restarts" in str(failed.value)


async def test_a_failed_docker_start_names_the_daemons_reason_not_the_clis_summary() -> None:
    from console.domain.swap import container_actions as ca
    from console.domain.swap.controller import StepFailed

    recorded = _real("start_missing_binary")
    ctl = _Ctl([SimpleNamespace(ok=False, exit_status=recorded["rc"], text="", error_text=recorded["stderr"])])
    with pytest.raises(StepFailed) as failed:
        await container_steps.docker_command(ctl, "start_new", "alice", "sglang-new",  # type: ignore[arg-type]
                                             ca.start_container("sglang-new").commands[0], running_after=True)
    said = str(failed.value)
    assert "failed to start containers" not in said
    assert "/opt/sglang/bin/missing-server: no such file or directory" in said


# -- the compose container: labels anyone can set (issue 34, item 8) ------------------------------------
def _row(name: str, number: str, project: str = "seeds", files: str = "/etc/sglang/compose.yaml") -> ContainerRow:
    labels = (("com.docker.compose.container-number", number), ("com.docker.compose.project", project),
              ("com.docker.compose.project.config_files", files), ("com.docker.compose.service", "qwen"))
    return ContainerRow("id-" + name, name, "img", "python3 -m sglang.launch_server", "Up", "running", labels)


def test_an_impostor_carrying_composes_labels_does_not_win_over_the_projects_own_container() -> None:
    own = _row("seeds-qwen-1", "1")
    for impostor in (_row("aaa", "0"), _row("aaa", "1"), _row("zzz", "1", files="/tmp/x.yaml"),
                     _row("seeds-qwen-0", "1", files="/tmp/x.yaml")):
        for rows in ([own, impostor], [impostor, own]):
            assert compose_container_on_host(rows, "seeds", "qwen", "/etc/sglang/compose.yaml") == "seeds-qwen-1"


def test_replicas_are_compared_as_numbers_nine_before_ten() -> None:
    rows = [_row("seeds-qwen-10", "10"), _row("seeds-qwen-9", "9")]
    assert compose_container_on_host(rows, "seeds", "qwen", "/etc/sglang/compose.yaml") == "seeds-qwen-9"


# -- the logs of a compose profile's snapshot, and of a created new container -----------------------------
class _Recording:
    def __init__(self) -> None:
        self.scripts: list[str] = []

    async def run(self, script: str, timeout: float | None = None) -> SimpleNamespace:
        self.scripts.append(script)
        return SimpleNamespace(ok=True, exit_status=0, text="", stdout=b"", error_text="")


async def test_a_compose_profiles_snapshot_reads_the_logs_of_the_services_container_not_its_name() -> None:
    transport = _Recording()
    watcher = ContainerWatcher(transport, "qwen", None, compose_file="/etc/sglang/compose.yaml",  # type: ignore[arg-type]
                               compose_service="qwen")
    watcher.compose_container = "seeds-qwen-1"  # what the service reading found
    await ComposeLogFollower(transport, watcher).read_backlog()  # type: ignore[arg-type]
    (script,) = transport.scripts
    assert script.split(" 2>&1")[0].endswith("-- seeds-qwen-1")


async def test_the_snapshots_log_reads_the_serving_container_when_the_new_one_is_merely_created(
        sim: Any, sim_transport: Any) -> None:
    root = sim.root
    add_container(root, _inspect(root, "sglang-old", "shared/models", running=True, model="M", extra=[]),
                  ["old server line one", "old server line two"])
    new = _inspect(root, "sglang-new", "shared/models", running=False, model="N", extra=[])
    new["State"].update(Status="created")
    add_container(root, new)
    append_log(root, "sglang-old", "old server line three")
    events = await LogFollower(sim_transport, container="sglang-new", compare_container="sglang-old").read_backlog()
    assert [e.text for e in events][-3:] == ["old server line one", "old server line two", "old server line three"]


# -- escape sequences from a container (issue 34, item 1) ------------------------------------------------
async def test_an_st_terminated_osc_52_in_a_containers_model_path_never_reaches_the_pane(
        sim: Any, sim_transport: Any) -> None:
    root = sim.root
    osc52 = "\x1b]52;c;cm0gLXJmIH4K\x1b\\"
    title = "\x1b]0;pwned\x1b\\"
    obj = _inspect(root, "sglang-evil", "shared/models", running=True, model=f"M{osc52}", extra=[])
    obj["Config"]["Labels"] = {f"team{title}": f"llm{osc52}"}
    obj["Config"]["Env"] = [f"NOTE=hi{title}"]
    obj["Config"]["Image"] = f"lmsysorg/sglang:v0.5.23{title}"
    add_container(root, obj)
    watcher = ContainerWatcher(sim_transport, "sglang-evil", None)
    report = await watcher.poll()
    spec = watcher.specs["new"]
    texts = [report.new.text or "", json.dumps(spec.labels), json.dumps(spec.env), spec.image, " ".join(spec.argv),
             *(r.command + r.name + json.dumps(r.labels) for r in watcher.rows)]
    assert all("\x1b" not in t and "\x07" not in t for t in texts), texts
    assert "--model-path /models/M" in (report.new.text or "")


# -- CLI 20.10's own words (the fake docker plays CLI 28's) ----------------------------------------------
class _Replies:
    """A transport answering the service poll's script with one recorded real output per section."""

    def __init__(self, sections: dict[str, str]) -> None:
        self.sections = sections

    async def run(self, script: str, timeout: float | None = None) -> Any:
        text = "".join(f"@@{k}\n{v}" for k, v in self.sections.items())
        return SimpleNamespace(text=text, stdout=text.encode(), exit_status=0, ok=True, error_text="")


@pytest.mark.parametrize("cli", ["cli20", "cli28"])
async def test_a_missing_container_reads_as_one_line_naming_it_on_both_clis(cli: str) -> None:
    """CLI 20.10 says "Error: No such container: NAME", CLI 28 "Error response from daemon: …", both
    after an empty `[]` on stdout: the service pane gets one line that names the container, and the
    ps rows of the same CLI read as the others'."""
    missing = _real(f"inspect_missing_{cli}")
    ps = _real(f"ps_template_{cli}")
    watcher = ContainerWatcher(_Replies({"inspect0": missing["stdout"] + missing["stderr"],  # type: ignore[arg-type]
                                         "rc0": f"{missing['rc']}\n", "ps": ps["stdout"]}), "gc-missing", None)
    specs, on_host = await watcher.read_specs(["gc-missing"])
    assert specs == [f"gc-missing: {missing['stderr'].strip()}"] and "\n" not in specs[0] and "[]" not in specs[0]
    assert "No such container: gc-missing" in specs[0]
    assert [r.name for r in watcher.rows] == [r.name for r in parse_ps(_real(f"ps_json_{cli}")["stdout"])]
    assert on_host and set(on_host) <= {r.name for r in watcher.rows}


def test_the_stop_and_restart_timeouts_are_words_both_clis_accept() -> None:
    """20.10 rejects `--timeout` (rc 125, recorded), 28 deprecates `--time` (a line on stdout): the
    console's stop says `-t N`, which both took (recorded rc 0)."""
    from console.domain.swap import container_actions

    assert _real("stop_timeout_cli20")["rc"] == 125 and "unknown flag: --timeout" in _real("stop_timeout_cli20")["stderr"]
    assert _real("stop_t_cli20")["rc"] == 0 and _real("stop_t_cli28")["rc"] == 0
    scripts = " ".join(c.script for a in (container_actions.stop_container("gc-old"),) for c in a.commands)
    assert " -t " in scripts and "--timeout" not in scripts and "--time " not in scripts
