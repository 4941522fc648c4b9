"""The beside server's GPUs as systemd will apply the unit's environment (issue 34, item 6): an
`Environment=CUDA_VISIBLE_DEVICES` added to the drafted unit loses to an EnvironmentFile= that sets it
(applied after every Environment=), to a drop-in (parsed after the unit file) and to
UnsetEnvironment=; GPU-UUID and MIG forms were mangled (`4,5GPU-…`). The console reads the drop-ins
and the files on the host through the transport and refuses what it cannot set.

The host here is this machine through the local transport, its unit directories temporary ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.domain.analysis import unit_environment as ue
from console.host.parsers.systemd import parse_unit
from console.domain.swap import actions as act
from console.domain.swap import fastpath, path_choice
from console.host.transport import LocalTransport
from tests.kit.downtime import controller
from tests.kit.figures import record

ROW = "beside: unit environments that would boot the new server on the old GPUs (refused, or set right)"

UNIT = """[Unit]
Description=new
[Service]
{env}
ExecStart=/usr/bin/python3 -m sglang.launch_server --model-path /m/new --port 30000 --tp 4
Restart=always

[Install]
WantedBy=multi-user.target
"""


def _env(text: str) -> dict[str, str]:
    return dict(parse_unit(text, "u").environment)


@pytest.mark.parametrize("old", ["0,1", "GPU-6f1c2a3b-0000-1111-2222-333344445555,GPU-7f1c2a3b-0000-1111-2222-3333"
                                 "44445556", "'GPU-6f1c2a3b'"])
def test_every_form_of_the_old_value_is_replaced_not_mangled(old: str) -> None:
    draft = UNIT.format(env=f'Environment="NCCL_P2P_LEVEL=NVL" CUDA_VISIBLE_DEVICES={old} "HF_HOME=/h x"')
    text = fastpath.beside_unit_text(draft, (4, 5), 30001)
    assert _env(text) == {"NCCL_P2P_LEVEL": "NVL", "CUDA_VISIBLE_DEVICES": "4,5", "HF_HOME": "/h x"}
    assert "GPU-" not in text and text.count("CUDA_VISIBLE_DEVICES") == 1 and "--port 30001" in text
    record(ROW, tried=1, failed=0)


def test_a_later_environment_line_in_the_unit_cannot_win() -> None:
    draft = UNIT.format(env="Environment=CUDA_VISIBLE_DEVICES=0,1\nEnvironment=A=1 CUDA_VISIBLE_DEVICES=2,3")
    text = fastpath.beside_unit_text(draft, (6, 7), 30001)
    assert _env(text) == {"A": "1", "CUDA_VISIBLE_DEVICES": "6,7"}


def test_a_unit_pinned_to_mig_instances_is_refused() -> None:
    draft = UNIT.format(env="Environment=CUDA_VISIBLE_DEVICES=MIG-4f5e6d7c-1111-2222-3333-444455556666")
    with pytest.raises(act.ActionError, match="MIG instances"):
        fastpath.beside_unit_text(draft, (4, 5), 30001)


@pytest.fixture
def host(tmp_path: Path):  # noqa: ANN201 - (controller, tmp dirs) on the local transport
    ctl, _, _ = controller(approval=False)
    ctl.session.transport = LocalTransport()
    etc, lib = tmp_path / "etc", tmp_path / "lib"
    etc.mkdir()
    lib.mkdir()
    ctl.fast.unit_dirs = (str(etc), str(lib))
    ctl.profile.unit_draft = str(tmp_path / "draft.service")
    return ctl, tmp_path


async def _problem(ctl, draft: str) -> str | None:  # noqa: ANN001
    Path(ctl.profile.unit_draft).write_text(draft)
    try:
        return await path_choice.beside_environment_problem(ctl, (4, 5, 6, 7), 30001)
    finally:
        await ctl.session.transport.close()


async def test_an_environment_file_that_sets_the_gpus_refuses_beside(host) -> None:  # noqa: ANN001
    ctl, tmp = host
    (tmp / "sglang.env").write_text("# the site's GPUs\nexport CUDA_VISIBLE_DEVICES=0,1,2,3\n")
    why = await _problem(ctl, UNIT.format(env=f"EnvironmentFile={tmp}/sglang.env"))
    assert why is not None and f"EnvironmentFile={tmp}/sglang.env sets CUDA_VISIBLE_DEVICES" in why
    record(ROW, tried=1, failed=0)


async def test_an_environment_file_without_the_variable_is_fine_and_a_missing_optional_one_too(host) -> None:  # noqa: ANN001
    ctl, tmp = host
    (tmp / "sglang.env").write_text("HF_HOME=/srv/hf\n# CUDA_VISIBLE_DEVICES=0 (a comment)\n")
    assert await _problem(ctl, UNIT.format(env=f"EnvironmentFile={tmp}/sglang.env\n"
                                               f"EnvironmentFile=-{tmp}/absent.env")) is None


async def test_a_missing_required_environment_file_is_said(host) -> None:  # noqa: ANN001
    ctl, tmp = host
    why = await _problem(ctl, UNIT.format(env=f"EnvironmentFile={tmp}/absent.env"))
    assert why is not None and "is not on the host" in why


@pytest.mark.parametrize(("conf", "said"), [
    ("[Service]\nEnvironment=CUDA_VISIBLE_DEVICES=0,1,2,3\n", "sets CUDA_VISIBLE_DEVICES=0,1,2,3 after the unit file"),
    ("[Service]\nEnvironment=\n", "clears Environment="),
    ("[Service]\nUnsetEnvironment=CUDA_VISIBLE_DEVICES\n", "UnsetEnvironment= removes"),
    ("[Service]\nEnvironmentFile={tmp}/gpus.env\n", "gpus.env sets CUDA_VISIBLE_DEVICES"),
])
async def test_a_drop_in_that_would_win_refuses_beside(host, conf: str, said: str) -> None:  # noqa: ANN001
    ctl, tmp = host
    (tmp / "gpus.env").write_text("CUDA_VISIBLE_DEVICES=0,1,2,3\n")
    d = tmp / "lib" / "new.service.d"
    d.mkdir()
    (d / "50-site.conf").write_text(conf.format(tmp=tmp))
    why = await _problem(ctl, UNIT.format(env="Environment=CUDA_VISIBLE_DEVICES=0,1,2,3"))
    assert why is not None and said in why, why
    record(ROW, tried=1, failed=0)


async def test_a_drop_in_masked_by_an_empty_one_of_the_same_name_in_etc_is_not_applied(host) -> None:  # noqa: ANN001
    ctl, tmp = host
    for base, text in (("lib", "[Service]\nEnvironment=CUDA_VISIBLE_DEVICES=0\n"), ("etc", "")):
        d = tmp / base / "service.d"
        d.mkdir()
        (d / "50-site.conf").write_text(text)
    assert await _problem(ctl, UNIT.format(env="")) is None


def test_the_drop_in_directories_systemd_reads() -> None:
    assert ue.dropin_dir_names("sglang-qwen-new.service") == (
        "sglang-qwen-new.service.d", "sglang-qwen-.service.d", "sglang-.service.d", "service.d")
    assert ue.dropin_dir_names("sg@a.service")[:2] == ("sg@a.service.d", "sg@.service.d")


async def test_the_beside_step_checks_again_before_it_starts(host) -> None:  # noqa: ANN001
    """The plan read the host clean; a drop-in added since then refuses the start, nothing runs."""
    from tests.kit.downtime import TCP_FREE, plan

    ctl, tmp = host
    Path(ctl.profile.unit_draft).write_text(UNIT.format(env=""))
    ctl.fast.plan = plan("beside")
    ctl.fast.env_checked = True
    d = tmp / "etc" / "new.service.d"
    d.mkdir()
    (d / "gpu.conf").write_text("[Service]\nEnvironment=CUDA_VISIBLE_DEVICES=0,1,2,3\n")
    ran: list[str] = []
    real_run = ctl.session.transport.run

    async def run(script: str, timeout: float = 30):  # noqa: ANN202 - the port table scripted, the rest real
        ran.append(script)
        if "/proc/net/tcp" in script:
            from console.host.transport.base import CommandResult

            return CommandResult(0, TCP_FREE.encode(), b"", 0.01)
        if "systemctl" in script:
            raise AssertionError("started")
        return await real_run(script, timeout=timeout)

    ctl.session.transport.run = run
    try:
        assert ctl.request("beside", "ana") is None
        await ctl.wait_idle(20)
    finally:
        await ctl.session.transport.close()
    step = ctl.state.swap.steps["beside"]
    assert step.state == "refused" and "gpu.conf sets CUDA_VISIBLE_DEVICES=0,1,2,3" in step.detail, step.detail
    assert not any("systemctl" in c for c in ran)
    record(ROW, tried=1, failed=0)
