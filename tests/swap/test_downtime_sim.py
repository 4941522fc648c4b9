"""Issue 24: the simulator supports every path — /update_weights_from_disk as SGLang answers it,
an 8-GPU host where the old server uses 4, a router with its worker API, boots whose weights phase
follows the simulated page cache (a labelled simulator parameter), and fincore/free/dd."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest

from console.demo.hostsim import HostSimulator, pagecache
from console.demo.hostsim import downtime_scenario as ds
from console.demo.hostsim.scenario import MODEL_DIR, NEW_UNIT, OLD_MODEL_DIR, OLD_UNIT
from console.domain.swap import prediction, prewarm
from console.host.transport.ssh import SshTransport
from tests.kit.hosts import sim_options

SPEED = 20.0


async def _sim(tmp_path: Path, path: str, **kw: object) -> tuple[HostSimulator, ds.Downtime, SshTransport]:
    sim = HostSimulator(tmp_path / "host", speed=SPEED, scenario="drive")
    await sim.start()
    dt = await ds.start(sim, path, **kw)  # type: ignore[arg-type]
    t = SshTransport(sim_options(sim))
    await t.connect()
    return sim, dt, t


async def _close(sim: HostSimulator, dt: ds.Downtime, t: SshTransport) -> None:
    await t.close()
    await dt.close()
    await sim.stop()


async def _ready(port: int, timeout: float = 60) -> None:
    async with httpx.AsyncClient(timeout=3) as c:
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            try:
                if (await c.get(f"http://127.0.0.1:{port}/health")).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError("not ready")
            await asyncio.sleep(0.1)


def test_the_simulated_rates_are_labelled_parameters() -> None:
    assert pagecache.LABEL == "simulator parameter, not a measurement"
    src = Path(pagecache.__file__).read_text()
    assert "SIMULATOR PARAMETER, NOT A MEASUREMENT" in src.upper()


async def test_update_weights_from_disk_replies_as_sglang_and_pauses_requests(tmp_path: Path) -> None:
    sim, dt, t = await _sim(tmp_path, "in-place")
    try:
        ds.write_model(sim.path(ds.FT_MODEL_DIR), json.loads(sim.path(MODEL_DIR + "/config.json").read_text()),
                       [2_000_000_000] * 3)
        await _ready(sim.server_port)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{sim.server_port}", timeout=60) as c:
            # A request arriving during the update waits (paused), then is served.
            update = asyncio.ensure_future(c.post("/update_weights_from_disk", json={
                "model_path": sim.host_path(ds.FT_MODEL_DIR), "weight_version": "ft-1"}))
            await asyncio.sleep(0.05)
            gen = asyncio.ensure_future(c.post("/v1/completions", json={"prompt": "hi", "max_tokens": 2}))
            r = await update
            assert r.status_code == 200
            assert r.json() == {"success": True, "message": "Succeeded to update model weights.",
                                "num_paused_requests": 1}
            assert (await gen).status_code == 200
            info = (await c.get("/server_info")).json()
            assert info["model_path"] == sim.host_path(ds.FT_MODEL_DIR) and info["weight_version"] == "ft-1"
        journal = (sim.root / ".sim" / "journal" / f"{NEW_UNIT}.jsonl").read_text()
        assert "Update engine weights online from disk begin. avail mem=" in journal
        assert "Update weights end." in journal
        # The shards the server read are in the simulated page cache now.
        shards = pagecache.shards(sim.host_path(ds.FT_MODEL_DIR))
        assert len(shards) == 3 and all(pagecache.resident(str(p), sim.root) == 2_000_000_000 for p in shards)
    finally:
        await _close(sim, dt, t)


async def test_an_update_with_another_architecture_fails_and_the_old_weights_serve(tmp_path: Path) -> None:
    sim, dt, t = await _sim(tmp_path, "in-place")
    try:
        ds.write_model(sim.path(ds.FT_MODEL_DIR), ds.qwen397b_config(), [1_000_000_000])
        await _ready(sim.server_port)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{sim.server_port}", timeout=60) as c:
            r = await c.post("/update_weights_from_disk", json={"model_path": sim.host_path(ds.FT_MODEL_DIR)})
            assert r.status_code == 400
            body = r.json()
            assert body["success"] is False and "Rolling back to original weights." in body["message"]
            assert set(body) == {"success", "message", "num_paused_requests"}
            assert (await c.get("/server_info")).json()["model_path"] == sim.host_path(MODEL_DIR)
            assert (await c.post("/v1/completions", json={"prompt": "x", "max_tokens": 1})).status_code == 200
    finally:
        await _close(sim, dt, t)


async def test_the_weights_phase_follows_the_simulated_page_cache(tmp_path: Path) -> None:
    sim, dt, t = await _sim(tmp_path, "restart", earlier_boot=True)
    try:
        old = sim.host_path(OLD_MODEL_DIR)
        await _ready(sim.server_port, 120)
        from console.host.parsers.sglang_log import parse_line

        def boots() -> list:
            journal = (sim.root / ".sim" / "journal" / f"{OLD_UNIT}.jsonl").read_text().splitlines()
            return prediction.boots_from_events([parse_line(json.loads(ln)["MESSAGE"]) for ln in journal])

        # /health answers from the server itself; its lines reach the journal through the unit's runner,
        # which under load may write the ready line a moment later (the clean-clone CI run read none)
        deadline = asyncio.get_running_loop().time() + 60
        while not boots() and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.1)
        (boot,) = boots()
        # The simulator's own timing for a cold read of those bytes, at its speed:
        expected = ds.OLD_397B_BYTES // ds.OLD_397B_SHARDS * ds.OLD_397B_SHARDS / (pagecache.SIM_DISK_GBPS * 1e9)
        assert boot.weights_s == pytest.approx(expected / SPEED, rel=0.01)
        # ...and it read them: fincore on the host now says they are cached.
        files = [str(p) for p in pagecache.shards(old)]
        r = await t.run(prewarm.fincore_command(files), timeout=30)
        res = prediction.parse_fincore(r.text, sum(Path(f).stat().st_size for f in files), r.exit_status or 0)
        assert res.fraction == 1.0 and res.files == ds.OLD_397B_SHARDS
    finally:
        await _close(sim, dt, t)


async def test_the_prewarm_fills_the_simulated_page_cache_and_stops_on_low_memory(tmp_path: Path) -> None:
    sim, dt, t = await _sim(tmp_path, "restart", memory_pressure=1.0)
    try:
        d = sim.path(MODEL_DIR)
        ds.write_model(d, {}, [3 << 30, 3 << 30])
        names = [p.name for p in pagecache.shards(str(d))]
        # Enough margin for the first shard only: MemAvailable falls as the (pinned) cache fills.
        margin_gib = (pagecache.SIM_MEM_AVAILABLE >> 30) - 4
        body = prewarm.script([f"{d}/{n}" for n in names], 6 << 30, rate_mbps=1_000_000, margin_gib=margin_gib)
        r = await t.run(body, timeout=60)
        assert r.exit_status == prewarm.EXIT_LOW_MEMORY
        assert "prewarm: stopped: MemAvailable" in r.text
        assert pagecache.resident(f"{d}/{names[0]}", sim.root) == 3 << 30
        assert pagecache.resident(f"{d}/{names[1]}", sim.root) < 3 << 30
    finally:
        await _close(sim, dt, t)


async def test_eight_gpus_the_old_server_on_four_and_the_router_worker_api(tmp_path: Path) -> None:
    sim, dt, t = await _sim(tmp_path, "beside")
    try:
        await _ready(sim.server_port)
        r = await t.run("nvidia-smi --query-compute-apps=gpu_uuid,pid,process_name,used_memory "
                        "--format=csv,noheader,nounits; nvidia-smi -L", timeout=20)
        assert r.text.count("GPU ") >= 8 and "GPU 7:" in r.text
        apps = [ln for ln in r.text.splitlines() if "sglang::scheduler" in ln]
        assert len(apps) == 4 and all("-1b8e3f6d000" in a for a in apps)  # GPUs 0-3 only
        assert dt.router_url is not None
        async with httpx.AsyncClient(base_url=dt.router_url, timeout=30) as c:
            for _ in range(100):
                try:
                    lw = await c.get("/list_workers")
                    break
                except httpx.HTTPError:
                    await asyncio.sleep(0.1)
            assert lw.json() == {"urls": [f"http://127.0.0.1:{sim.server_port}"]}
            gen = await c.post("/v1/completions", json={"prompt": "hi", "max_tokens": 2})
            assert gen.status_code == 200
            bad = await c.post("/add_worker", params={"url": "http://127.0.0.1:1"})
            assert bad.status_code == 400 and "Failed to add worker" in bad.text
            rm = await c.post("/remove_worker", params={"url": f"http://127.0.0.1:{sim.server_port}"})
            assert rm.text == f"Successfully removed worker: http://127.0.0.1:{sim.server_port}"
            assert (await c.get("/list_workers")).json() == {"urls": []}
    finally:
        await _close(sim, dt, t)


async def test_a_router_that_refuses_workers(tmp_path: Path) -> None:
    sim, dt, t = await _sim(tmp_path, "beside", router_refuse=True)
    try:
        await _ready(sim.server_port)
        assert dt.router_url is not None
        async with httpx.AsyncClient(base_url=dt.router_url, timeout=30) as c:
            for _ in range(100):
                try:
                    r = await c.post("/add_worker", params={"url": f"http://127.0.0.1:{sim.server_port}"})
                    break
                except httpx.HTTPError:
                    await asyncio.sleep(0.1)
            assert r.status_code == 400 and "refused" in r.text
    finally:
        await _close(sim, dt, t)
