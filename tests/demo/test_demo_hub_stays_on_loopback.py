"""The demo's Hub lookup stays on loopback (the simulated host's own Hub), its task's exception is
always retrieved, and the suite's guard refuses and reports any non-loopback address."""

from __future__ import annotations

import asyncio
import gc
import socket
import threading
from pathlib import Path
from typing import Any

import pytest

from console.demo.hostsim import HostSimulator
from console.demo.hostsim.downloader import REPO_ID, DownloadPlan
from console.demo.hostsim.scenario import MODEL_DIR, demo_profile
from console.host.hub import HubAccess, HubError, fetch_expected
from console.host.session import HostSession, make_transport
from console.host.sources.download import DownloadWatcher
from console.host.transport import LocalTransport
from tests.kit import netguard
from tests.kit.hosts import wait_for


async def test_the_demo_reads_its_file_list_from_the_simulated_hub_on_loopback(sim: HostSimulator) -> None:
    sim.path(MODEL_DIR).mkdir(parents=True, exist_ok=True)
    profile = demo_profile(sim)
    assert profile.hub_endpoint == sim.hub.url and profile.hub_endpoint.startswith("http://127.0.0.1:")
    session = HostSession(profile, make_transport(profile), demo=True)
    await session.transport.connect()
    try:
        watcher = session.download_watcher(one_shot=True)
        assert watcher is not None
        progress = await watcher.poll()
    finally:
        await session.transport.close()
    assert sim.hub.requests >= 1  # asked here, not huggingface.co (the guard would fail this test)
    plan = DownloadPlan()
    assert progress.expected_source == "hub"
    assert progress.bytes_total == sum(f.size for f in plan.files)  # the simulated download's true total
    assert progress.expected_note == "the simulated host's Hub file list"  # says where it came from
    hub = watcher.state.hub_expected
    assert hub is not None and {f.path: f.sha256 for f in hub.files} == {f.path: f.sha256 for f in plan.files}


async def test_a_demo_profile_without_its_hub_asks_no_hub_at_all(tmp_path: Path) -> None:
    from dataclasses import replace

    sim = HostSimulator(tmp_path / "h")
    await sim.start()
    try:
        sim.path(MODEL_DIR).mkdir(parents=True, exist_ok=True)
        profile = replace(demo_profile(sim), hub_endpoint=None)
        session = HostSession(profile, make_transport(profile), demo=True)
        watcher = session.download_watcher()
        assert watcher is not None and watcher.hub is None
        await session.transport.connect()
        try:
            await watcher.poll()
        finally:
            await session.transport.close()
        assert watcher.state.hub_task is None and sim.hub.requests == 0
    finally:
        await sim.stop()


async def test_the_simulated_hub_answers_as_the_hub_does(sim: HostSimulator) -> None:
    access = HubAccess(sim.hub.url, "the simulated host's Hub", send_token=False, use_cache=False)
    got = await asyncio.to_thread(fetch_expected, REPO_ID, access=access)
    assert got.total_bytes == sum(f.size for f in DownloadPlan().files)
    with pytest.raises(HubError, match="RepositoryNotFound"):
        await asyncio.to_thread(fetch_expected, "Qwen/Nope", access=access)
    # use_cache=False: a demo's answer never lands in the user's cache
    from console.host.hub import cache_dir

    assert not cache_dir().exists() or not any(cache_dir().iterdir())


async def test_the_hub_lookup_reaches_no_other_host_than_its_endpoint(sim: HostSimulator,
                                                                     monkeypatch: pytest.MonkeyPatch,
                                                                     tmp_path: Path) -> None:
    """huggingface_hub's user agent once fetched an "agent harnesses" registry from huggingface.co on
    the first request, whatever the endpoint: the demo's lookup reached the real Hub anyway."""
    from huggingface_hub import constants
    from huggingface_hub.utils import _detect_agent

    monkeypatch.setattr(_detect_agent, "_registry", None)  # as in a fresh process
    monkeypatch.setattr(constants, "AGENT_HARNESSES_PATH", str(tmp_path / "none.json"))
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_TELEMETRY", False)
    access = HubAccess(sim.hub.url, send_token=False, use_cache=False)
    await asyncio.to_thread(fetch_expected, REPO_ID, access=access)
    found = netguard.take(netguard._current[0])
    assert not found, netguard.describe(found)


async def test_a_failed_hub_lookup_is_retrieved_even_when_its_watcher_is_gone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def offline(*_a: Any, **_k: Any) -> Any:
        raise HubError("Hub unreachable for Qwen/Tiny: ConnectError: no network")

    monkeypatch.setattr("console.host.sources.download.fetch_expected", offline)
    loop = asyncio.get_running_loop()
    reported: list[dict[str, Any]] = []
    old = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, ctx: reported.append(ctx))
    transport = LocalTransport()
    try:
        watcher = DownloadWatcher(transport, str(tmp_path), "Qwen/Tiny")
        await watcher.poll()
        task = watcher.state.hub_task
        assert task is not None
        await wait_for(task.done, 10)
        await asyncio.sleep(0)  # the done callbacks run
        problem = watcher.state.hub_problem  # kept when it ended, not only at the next poll
        del watcher, task  # the console closed before its next poll
        gc.collect()
        await asyncio.sleep(0)
    finally:
        loop.set_exception_handler(old)
        await transport.close()
    assert not [c for c in reported if "never retrieved" in str(c.get("message"))], reported
    assert problem == "Hub unreachable for Qwen/Tiny: ConnectError: no network"


def test_the_guard_refuses_other_addresses_and_names_them() -> None:
    me = netguard._current[0]
    errors: list[BaseException] = []

    def elsewhere() -> None:  # in a thread, as asyncio.to_thread runs the Hub lookup
        for call in (lambda: socket.getaddrinfo("huggingface.co", 443),
                     lambda: socket.create_connection(("192.0.2.1", 443), timeout=0.1)):
            try:
                call()
            except OSError as exc:
                errors.append(exc)
        with socket.socket() as s:
            try:
                s.connect(("10.1.230.174", 22))
            except OSError as exc:
                errors.append(exc)

    t = threading.Thread(target=elsewhere, name="hub-lookup")
    t.start()
    t.join(10)
    found = netguard.take(me)
    assert len(errors) == 3
    assert [(v.host, v.call, v.thread) for v in found] == [
        ("huggingface.co", "getaddrinfo", "hub-lookup"), ("192.0.2.1", "create_connection", "hub-lookup"),
        ("10.1.230.174", "connect", "hub-lookup")]
    assert "huggingface.co (getaddrinfo, thread hub-lookup)" in netguard.describe(found)
    # loopback, the wildcard a listener binds, and AF_UNIX are allowed
    for host in ("127.0.0.1", "127.8.9.10", "::1", "localhost", "::ffff:127.0.0.1", "0.0.0.0", None):
        assert netguard.is_local(host), host
    for host in ("huggingface.co", "10.1.230.174", "::ffff:10.0.0.1", "fe80::1", "example.invalid"):
        assert not netguard.is_local(host), host
    # AI_NUMERICHOST only parses (asyncssh normalizes known_hosts patterns so, "*" included)
    with pytest.raises(socket.gaierror):
        socket.getaddrinfo("*", None, flags=socket.AI_NUMERICHOST)
    assert socket.getaddrinfo("10.1.230.174", None, flags=socket.AI_NUMERICHOST)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        with socket.create_connection(s.getsockname(), timeout=5):
            pass
    assert netguard.take(me) == []
