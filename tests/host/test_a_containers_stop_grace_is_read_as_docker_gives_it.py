"""Docker's Config.StopTimeout and Compose's stop_grace_period read as the whole seconds Docker keeps
(the real daemon and plugin: tests/real/test_a_containers_stop_grace_is_its_own.py); a value that is
not a grace a swap can wait out (Docker's -1 "forever", a bool, a day and more, a word) is unknown,
and the console's own 60 s is used and said."""

from __future__ import annotations

import json

import pytest

from console.domain.swap import container_actions as ca
from console.host.parsers.docker import parse_grace_period, parse_inspect


def _inspect(stop: object) -> str:
    config = {"Image": "lmsysorg/sglang:v0.5.23-cu129", "Cmd": ["python3"]}
    if stop != "absent":
        config["StopTimeout"] = stop
    return json.dumps([{"Name": "/s", "Config": config, "HostConfig": {"NetworkMode": "host"}}])


@pytest.mark.parametrize(("stop", "seconds"), [(120, 120), (0, 0), (None, None), ("absent", None), (-1, None),
                                               (True, None), (86_401, None), ("30", None), (1.5, None)])
def test_inspects_stop_timeout(stop: object, seconds: int | None) -> None:
    (spec,) = parse_inspect(_inspect(stop))
    assert spec.stop_timeout_s == seconds
    grace = ca.stop_grace(spec)
    assert grace.seconds == (60 if seconds is None else seconds)
    (cmd,) = ca.stop_container("s", grace=grace).commands
    assert f"docker stop -t {grace.seconds} -- s" in cmd.script and cmd.script.startswith(
        f"timeout -k 5 {grace.seconds + 30} ")


@pytest.mark.parametrize(("value", "seconds"), [("10s", 10), ("1m30s", 90), ("1h", 3600), ("1500ms", 1), ("2.5s", 2),
                                                (45, 45), ("500ms", 0), ("", None), ("ten", None), ("-5s", None),
                                                ("25h", None), (True, None), (None, None), ("1m 30s", None)])
def test_composes_stop_grace_period(value: object, seconds: int | None) -> None:
    assert parse_grace_period(value) == seconds
