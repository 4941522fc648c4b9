"""The simulated host's story on a loop (`--loop-s`, the soak's demo): every `loop_s` scenario
seconds the clock goes back to 0, the new service stops and the old one serves again, then the
story's swap plays once more; each time a real process of each unit, never one failed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from console.demo.hostsim import HostSimulator
from console.demo.hostsim.process import main as process_main
from console.demo.hostsim.scenario import NEW_UNIT, OLD_UNIT, start_scenario
from tests.kit.hosts import wait_for


def units(sim: HostSimulator) -> dict[str, dict[str, object]]:
    try:
        state: dict[str, dict[str, object]] = json.loads((sim.root / ".sim" / "units.json").read_text())
    except (OSError, ValueError):
        return {}
    return state


def active_pid(sim: HostSimulator, unit: str) -> int:
    u = units(sim).get(unit) or {}
    return int(u.get("pid") or 0) if u.get("active") == "active" else 0  # type: ignore[call-overload]


async def test_the_story_loops_twice_with_the_swap_back_and_forth(tmp_path: Path) -> None:
    sim = HostSimulator(tmp_path / "host", speed=25.0, loop_s=80.0)  # 80 scenario s: 3.2 s a loop
    await sim.start()
    try:
        await start_scenario(sim)
        seen: list[tuple[str, int]] = []  # (unit, pid) each time the serving unit changed

        def note() -> int:
            old, new = active_pid(sim, OLD_UNIT), active_pid(sim, NEW_UNIT)
            assert not (old and new), "both services ran at once"
            for unit, pid in ((OLD_UNIT, old), (NEW_UNIT, new)):
                if pid and (not seen or seen[-1] != (unit, pid)):
                    seen.append((unit, pid))
            return len(seen)

        # old → new, back to old (the loop), new again, old again: two loops
        await wait_for(lambda: note() >= 5 and sim.loops >= 2, 90)
        assert [u for u, _ in seen[:5]] == [OLD_UNIT, NEW_UNIT, OLD_UNIT, NEW_UNIT, OLD_UNIT]
        assert len({pid for _, pid in seen}) == len(seen)  # each time a process of its own
        assert all(u.get("active") != "failed" for u in units(sim).values())
        state = json.loads((sim.root / ".sim" / "state.json").read_text())
        assert state["loops"] == sim.loops >= 2
    finally:
        await sim.stop()


def test_the_loop_takes_only_a_positive_number_of_seconds(capsys: pytest.CaptureFixture[str]) -> None:
    for bad in ("0", "-5", "nan", "inf", "x"):
        with pytest.raises(SystemExit) as exc:
            process_main(["--loop-s", bad])
        assert exc.value.code == 2
        assert "--loop-s" in capsys.readouterr().err

