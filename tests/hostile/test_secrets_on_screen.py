"""Secrets planted on the simulated host (unit environment, unit argv, journal lines) never reach
the screen: every pane of the running app is searched in its SVG screenshot (issue 15, item 6)."""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from console.ui.app import ConsoleApp
from console.host.session import HostSession
from tests.kit.figures import record
from tests.kit.hosts import wait_for

UNIT = "/etc/systemd/system/sglang-qwen397b.service"


@pytest.fixture
async def planted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[ConsoleApp, list[str]]]:
    from console.demo.hostsim import HostSimulator
    from console.demo.hostsim.scenario import demo_profile, start_scenario
    from console.host.session import make_transport

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    sim = HostSimulator(tmp_path / "host")
    await sim.start()
    await start_scenario(sim)
    profile = demo_profile(sim)
    values = ["hf_sImUlAtEdToKeNnOtReAl0123456789"]  # the demo unit's own HF_TOKEN
    s = [secrets.token_hex(10) for _ in range(4)]
    unit = Path(sim.path(UNIT))
    text = unit.read_text().replace("[Service]\n", f"[Service]\nEnvironment=OPENAI_API_KEY=sk-{s[0]}\n"
                                                  f"Environment=\"DB_PASSWORD={s[1]}\"\n", 1)
    unit.write_text(text)
    values += [f"sk-{s[0]}", s[1]]
    journal = sim.root / ".sim" / "journal" / "sglang-qwen397b.service.jsonl"
    journal.parent.mkdir(parents=True, exist_ok=True)
    now_us = int(time.time() * 1e6)
    with open(journal, "a", encoding="utf-8") as fh:
        for i, line in enumerate([f"ERROR request rejected: Authorization: Bearer {s[2]}",
                                  f"server_args=ServerArgs(model_path='/m', api_key='{s[3]}')"]):
            fh.write(json.dumps({"__CURSOR": f"s=plant;i={i}", "__REALTIME_TIMESTAMP": str(now_us + i),
                                 "_SYSTEMD_UNIT": "sglang-qwen397b.service", "_PID": "1",
                                 "MESSAGE": line}) + "\n")
    values += [s[2], s[3]]
    try:
        yield ConsoleApp.for_session(HostSession(profile, make_transport(profile), demo=True)), values
    finally:
        await sim.stop()


async def test_planted_secrets_never_reach_a_screenshot(planted: tuple[ConsoleApp, list[str]]) -> None:
    app, values = planted
    shots = []
    async with app.run_test(size=(160, 50)) as pilot:
        await wait_for(lambda: app.pane("service").reading is not None
                       and app.pane("service").reading.data is not None
                       and app.pane("service").reading.data.env_changes, 20)
        await wait_for(lambda: "‹redacted›" in app.export_screenshot(), 30, 0.25)  # the panes drew what was read
        shots.append(app.export_screenshot())
        for key in "12345":
            await pilot.press(key)
            await pilot.pause(0.3)
            shots.append(app.export_screenshot())
            await pilot.press(key)
        env = {e.name for e in app.pane("service").reading.data.env_changes}
    blob = "\n".join(shots).replace("&#160;", " ")
    leaked = [v for v in values if v in blob]
    record("secrets planted on the host, searched in screenshots of every pane", tried=len(values),
           leaked=len(leaked))
    assert leaked == []
    assert "OPENAI_API_KEY" in env and "‹redacted›" in blob, "the planted entries were read and shown redacted"
