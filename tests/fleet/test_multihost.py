"""Many quiet simulated hosts in one process (issue 23 item 5): each its own port, host key and
hostname; the fleet reads every one of them."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from console.demo.hostsim.multihost import MultiHostServer, main
from console.host.parsers.nvidia_smi import parse_gpu_csv
from console.host.transport import HostKeyUnknown
from console.host.transport.ssh import SshOptions, SshTransport
from tests.kit.hosts import wait_for


def _options(profile: object, **overrides: object) -> SshOptions:
    p = profile
    values = dict(host=p.host, port=p.port, user=p.user, identity=p.identity,  # type: ignore[attr-defined]
                  known_hosts=p.known_hosts, ssh_config=(), connect_timeout_s=10)  # type: ignore[attr-defined]
    values.update(overrides)
    return SshOptions(**values)  # type: ignore[arg-type]


async def test_hosts_in_one_process_each_have_their_own_port_key_and_name() -> None:
    server = MultiHostServer(3)
    profiles = await server.start()
    try:
        assert len({p.port for p in profiles}) == 3
        keys = {h.host_key.export_public_key().decode() for h in server.hosts}
        assert len(keys) == 3
        uuids: set[str] = set()
        for profile in profiles:
            t = SshTransport(_options(profile))
            await t.connect()
            try:
                assert (await t.run("hostname", timeout=10)).text.strip() == profile.name
                smi = await t.run("nvidia-smi --query-gpu=index,name,uuid,memory.used,memory.total,"
                                  "utilization.gpu,temperature.gpu,power.draw,power.limit "
                                  "--format=csv,noheader,nounits", timeout=10)
                gpus = parse_gpu_csv(smi.text).gpus
                assert len(gpus) == 2 and all(g.name and g.memory_total_mib for g in gpus)
                uuids.update(g.uuid or "" for g in gpus)
            finally:
                await t.close()
        assert len(uuids) == 6, "GPUs of different hosts must not share UUIDs"
        # One host's known_hosts does not vouch for another's key.
        stranger = SshTransport(_options(profiles[1], known_hosts=profiles[0].known_hosts))
        with pytest.raises(HostKeyUnknown):
            await stranger.connect()
    finally:
        await server.stop()


async def test_the_fleet_reads_every_simulated_host() -> None:
    from console.domain.fleet.hosts import Fleet

    server = MultiHostServer(4)
    profiles = await server.start()
    fleet = Fleet([replace(p, connect_timeout_s=20) for p in profiles])
    try:
        await fleet.start()

        def all_read() -> bool:
            return all(s.data("gpu") is not None and len(s.data("gpu").gpus) == 2
                       and s.data("download") is not None for s in fleet.states)

        await wait_for(all_read, timeout=90, interval=0.2)
        assert sorted(fleet.hosts) == sorted(p.name for p in profiles)
        assert {s.data("gpu").source for s in fleet.states} == {"nvidia-smi-stream"}
    finally:
        await asyncio.wait_for(fleet.close(), 60)
        await server.stop()


def test_bad_counts_are_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["0"]) == 2
    assert main(["5", "--gpus", "0"]) == 2
    assert "1..1000 hosts" in capsys.readouterr().err
