"""Text the operator reads is cut where a reader would cut it (issue 35 item 6): the log pane's
last error starts at a sentence or a word, never "…ly means the child fai…"; a timeout reads
"after 10s", never "after 9.9999s" (a deadline's remainder). The log pane at 80x24, 120x40, 200x60."""

from __future__ import annotations

import time

import pytest

from console.domain.analysis.log_state import LogError, LogSummary
from console.core.state import HostState, ReadingChanged
from console.model import Reading
from console.units import seconds, tail_from_word
from tests.kit.hosts import wait_for
from tests.kit.screens import offline_state, screen_text

SIZES = [(80, 24), (120, 40), (200, 60)]
CRASH = ("[2026-12-03 08:06:41] Received sigquit from a child process. It usually means the child failed; "
         "scheduler_TP2 exited with code 1 while it was loading the model weights from the shared disk")


def test_timeouts_are_written_as_people_write_them() -> None:
    assert [seconds(v) for v in (9.9999, 10.0, 2.5, 0.25, 1.0, 90.0)] == ["10s", "10s", "2.5s", "0.25s", "1s",
                                                                           "1m30s"]


async def test_a_local_command_past_its_deadline_says_a_whole_figure() -> None:
    from console.host.transport.errors import CommandTimeout
    from console.host.transport.local import LocalTransport

    transport = LocalTransport()
    with pytest.raises(CommandTimeout) as raised:
        await transport.run("sleep 5", timeout=0.29999999)
    import re

    figure = re.search(r"after (\S+)s\b", str(raised.value))
    assert figure and re.fullmatch(r"\d+(\.\d{1,2})?", figure.group(1)), raised.value


def test_an_excerpt_starts_at_a_sentence_or_a_word() -> None:
    for width in range(20, len(CRASH)):
        cut = tail_from_word(CRASH, width)
        assert len(cut) <= width and cut.startswith("…"), (width, cut)
        start = len(CRASH) - (len(cut) - 1)
        assert CRASH[start - 1] == " ", (width, cut)  # the excerpt begins where a word begins


@pytest.mark.parametrize("size", SIZES)
async def test_the_log_panes_last_error_is_never_cut_inside_a_word(size: tuple[int, int]) -> None:
    from console.ui.app import ConsoleApp

    state: HostState = offline_state()
    app = ConsoleApp(state, None)
    async with app.run_test(size=size) as pilot:
        await pilot.press("4")
        await pilot.pause()
        message = CRASH.split("] ", 1)[1]
        summary = LogSummary("journal", "launch", (), None, None, None, None, None, None,
                             (LogError("08:06:41", "crash", message),), 1, 1.0)
        state.apply(ReadingChanged("gpu-01", "log", Reading("log", summary, time.time())))
        await wait_for(lambda: "last: " in screen_text(app), 10)
        line = next(x for x in screen_text(app).splitlines() if "last: " in x)
        excerpt = line.split("last: ", 1)[1].split(": ", 1)[1].rstrip(" │")
        assert excerpt.startswith(("…", "[")), line
        assert not excerpt.endswith("…"), line  # fits its room: no second cut at the end
        first = excerpt.lstrip("…").split()[0]
        assert first in message.split(), (first, line)

