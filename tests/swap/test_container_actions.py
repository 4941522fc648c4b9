"""The swap's container actions (issue 26): exactly the intended `docker` argv runs, hostile
names and references never reach a shell, every command is bounded by the host's timeout."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from console.domain.swap import container_actions as ca
from console.domain.swap.actions import ActionError

HOSTILE = ["", "-rm", "--help", "a b", "a;touch /tmp/x", "$(id)", "`id`", "a\nb", "a'b", 'a"b', "ä", "../x",
           "a/b" * 200, "x" * 600]


def _run(script: str, tmp_path: Path) -> list[list[str]]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    log = tmp_path / "argv.jsonl"
    stub = bin_dir / "docker"
    stub.write_text("#!/usr/bin/env python3\nimport json, sys\n"
                    f"open({str(log)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n")
    stub.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    subprocess.run(["sh", "-c", script], env=env, check=True, timeout=30)
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_each_action_runs_exactly_its_docker_command(tmp_path):
    cases = [
        (ca.check_image_present("lmsysorg/sglang:v0.5.23-cu129"),
         [["image", "inspect", "--format", "{{.Id}}", "--", "lmsysorg/sglang:v0.5.23-cu129"]]),
        (ca.pull_image("registry.local:5000/team/sglang:v0.5.5"),
         [["pull", "--", "registry.local:5000/team/sglang:v0.5.5"]]),
        (ca.create_from_compose("/etc/sglang/compose.yaml", "qwen122b"),
         [["compose", "-f", "/etc/sglang/compose.yaml", "create", "--no-recreate", "--", "qwen122b"]]),
        (ca.stop_container("sglang-qwen397b"), [["stop", "-t", "60", "--", "sglang-qwen397b"]]),
        (ca.start_container("sglang-qwen122b"), [["start", "--", "sglang-qwen122b"]]),
        (ca.rollback("sglang-qwen122b", "sglang-qwen397b"),
         [["stop", "-t", "60", "--", "sglang-qwen122b"], ["start", "--", "sglang-qwen397b"]]),
    ]
    for action, expected in cases:
        for command in action.commands:
            assert command.script.startswith("timeout -k 5 ")
        ran: list[list[str]] = []
        for command in action.commands:
            ran = _run(command.script, tmp_path)
        assert ran[-len(expected):] == expected
        (tmp_path / "argv.jsonl").unlink()


@pytest.mark.parametrize("value", HOSTILE)
def test_hostile_names_and_references_are_refused_before_any_command(value):
    for build in (ca.check_container, ca.check_image, ca.check_service, ca.stop_container, ca.start_container,
                  ca.pull_image, ca.check_image_present):
        with pytest.raises(ActionError):
            build(value)
    with pytest.raises(ActionError):
        ca.create_from_compose("relative/compose.yaml", "qwen122b")


def test_the_state_check_reads_one_line(tmp_path):
    script = ca.container_state_check("sglang-qwen122b")
    assert _run(script, tmp_path)[0][-2:] == ["--", "sglang-qwen122b"]
    assert ca.parse_container_state("restarting false 137 7 true\n") == {
        "status": "restarting", "running": "false", "exit_code": "137", "restarts": "7", "oom_killed": "true"}
    assert ca.parse_container_state("\nError response from daemon: No such container: x") == {}
    assert ca.parse_container_state("\nError: No such container: x") == {}  # CLI 20.10
    # A restarting container: Docker says Running true (tests/data/real/docker_inspect_restarting.*)
    assert ca.parse_container_state("restarting true 1 3 false\n")["running"] == "true"
