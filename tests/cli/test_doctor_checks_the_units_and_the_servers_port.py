"""`doctor` says what the first hour needs beyond SSH: each unit as systemd knows it and whether the
SSH user reads its journal, and whether the server's port answers /health through the forward."""

from __future__ import annotations

from console.cli.doctor import _server_check, _unit_check
from console.host.transport.base import CommandResult

HINT = ("Hint: You are currently not seeing messages from other users and the system.\n"
        "      Users in groups 'adm', 'systemd-journal' can see all messages.")


class _Answers:
    def __init__(self, text: str) -> None:
        self.text, self.scripts = text, []

    async def run(self, script: str, *, timeout: float = 10.0) -> CommandResult:
        self.scripts.append(script)
        return CommandResult(0, self.text.encode(), b"", 0.01)

    async def http_base_url(self, port: int) -> str:
        return "http://127.0.0.1:9"  # the discard port: nothing answers HTTP there


async def test_a_journal_the_user_cannot_read_fails_with_what_to_do() -> None:
    check = await _unit_check(_Answers(f"loaded\nactive\n{HINT}\n"), "sglang-qwen397b.service")  # type: ignore[arg-type]
    assert not check.ok and "systemd-journal or adm" in check.detail and check.detail.startswith("loaded, active")


async def test_a_unit_not_installed_yet_is_no_failure_and_a_hostile_name_is_one_operand() -> None:
    answers = _Answers("not-found\ninactive\n")
    check = await _unit_check(answers, "x; touch /tmp/pwned")  # type: ignore[arg-type]
    assert check.ok and "not installed yet" in check.detail
    assert "-- 'x; touch /tmp/pwned'" in answers.scripts[0]


async def test_a_port_where_nothing_answers_fails_naming_the_option() -> None:
    check = await _server_check(_Answers(""), 30000)  # type: ignore[arg-type]
    assert not check.ok and ":30000/health" in check.detail and "--server-port" in check.detail
