"""Generated secrets planted in units, environments, log lines and /server_info; every output the
console writes is searched for them (issue 15, item 6 and the suite's secrets line)."""

from __future__ import annotations

import io
import json
import secrets
import subprocess
import sys
from pathlib import Path

from rich.console import Console

from console.domain.analysis.service_diff import HostFacts
from console.domain.analysis.service_report import build_report, report_json, side_from_text
from console.model import Reading
from console.ui.panes.service import format_service
from console.redact import REDACTED, redact_json
from console.cli.snapshot import log_json
from console.host.sources.log import LogFollower
from console.host.transport import LocalTransport
from tests.kit.figures import record


def _secret(prefix: str = "") -> str:
    return prefix + secrets.token_urlsafe(12).replace("-", "x").replace("_", "y")


def _planted_unit(s: dict[str, str]) -> str:
    return (
        "[Unit]\nDescription=SGLang\n[Service]\n"
        f"Environment=HF_TOKEN={s['env']}\n"
        f"Environment=\"OPENAI_API_KEY={s['env2']}\"\n"
        f"Bogus line with api_key={s['warn']}\n"
        f"ExecStart=/usr/bin/env HF_TOKEN={s['envargv']} /opt/venv/bin/python -m sglang.launch_server "
        f"--model-path /m --tp-size 2 --api-key {s['flag']} --hf-token {s['hf']} --api_key={s['under']} "
        f"--admin-api-key={s['admin']}\n"
    )


def _all_secrets() -> dict[str, str]:
    return {k: _secret() for k in ("env", "env2", "warn", "envargv", "flag", "hf", "under", "admin")}


def _render(report: object) -> str:
    out = io.StringIO()
    Console(width=160, file=out, force_terminal=False).print(format_service(Reading("service", report, 0.0), width=160))
    return out.getvalue()


def test_secrets_in_a_unit_reach_no_output(tmp_path: Path) -> None:
    old_s, new_s = _all_secrets(), _all_secrets()
    old = side_from_text("old.service", _planted_unit(old_s))
    new = side_from_text("new.service", _planted_unit(new_s))
    report = build_report(old, new, HostFacts())
    outputs = [json.dumps(report_json(report)), _render(report), "\n".join(report.raw_diff), repr(report)]
    (tmp_path / "old.service").write_text(_planted_unit(old_s))
    (tmp_path / "new.service").write_text(_planted_unit(new_s))
    for extra in (["--json"], []):
        cli = subprocess.run([sys.executable, "-m", "console", "diff", str(tmp_path / "old.service"),
                              str(tmp_path / "new.service"), *extra], capture_output=True, text=True, timeout=60)
        outputs += [cli.stdout, cli.stderr]
        # A command that failed, or printed nothing, leaks nothing and proves nothing (issue 27).
        assert cli.returncode == 0 and "Traceback" not in cli.stderr, cli.stderr
        assert "old.service" in cli.stdout and "new.service" in cli.stdout, cli.stdout
        if extra:
            doc = json.loads(cli.stdout)
            assert "--api-key" in doc["old"]["argv"] and REDACTED in doc["new"]["argv"], doc["new"]["argv"]
    # The secrets were there to be found: the report carries the redaction where each one stood.
    assert json.dumps(report_json(report), ensure_ascii=False).count(REDACTED) >= len(new_s)
    blob = "\n".join(outputs)
    leaked = [v for v in [*old_s.values(), *new_s.values()] if v in blob]
    record("secrets planted in units (pane, JSON, raw diff, CLI text and --json)",
           tried=len(old_s) + len(new_s), leaked=len(leaked))
    assert leaked == []


LOG_FORMS = [
    "[2026-01-01 10:00:00] server_args=ServerArgs(model_path='/m', api_key='{S}', hf_token='{S}')",
    "[2026-01-01 10:00:01] ERROR request failed: Authorization: Bearer {S}",
    "[2026-01-01 10:00:02] WARNING config api_key: {S}",
    "[2026-01-01 10:00:03] INFO: 127.0.0.1 \"GET /v1/models?api-key={S} HTTP/1.1\" 401",
    "[2026-01-01 10:00:04] ERROR header x-api-key: {S} rejected",
    "[2026-01-01 10:00:05] ERROR password: {S}",
    "[2026-01-01 10:00:06] ERROR bad token sk-{A} and hf_{A}",
    "Traceback (most recent call last):",
    "  File \"x.py\", line 1, in <module> api_key={S}",
    "ValueError: invalid token={S}",
]


async def test_secrets_in_log_lines_reach_no_event_error_or_json(tmp_path: Path) -> None:
    values = []
    lines = []
    for form in LOG_FORMS:
        s, a = _secret(), _secret().replace("x", "a")[:8]
        values += [s, f"sk-{a}", f"hf_{a}"] if "{A}" in form else [s]
        lines.append(form.format(S=s, A=a))
    log = tmp_path / "sglang.log"
    log.write_text("\n".join(lines) + "\n")
    transport = LocalTransport()
    try:
        follower = LogFollower(transport, log_file=str(log))
        got = []
        async for batch in follower.batches():
            got.extend(batch.events)
            if len(got) >= len(lines):
                break
        summary = follower.tracker.summary()
        once = await follower.snapshot_once()
    finally:
        await transport.close()
    out = subprocess.run([sys.executable, "-m", "console", "snapshot", "--log-file", str(log), "--json"],
                         capture_output=True, text=True, timeout=60)
    blob = "\n".join([repr(got), repr(summary), json.dumps(log_json(once)), out.stdout, out.stderr])
    assert len(summary.errors) >= 4
    # Every line was read, by the follower and by the CLI, and the redaction stands where the secrets were.
    assert len(got) >= len(lines)
    assert all(REDACTED in event.text for form, event in zip(LOG_FORMS, got, strict=False) if "{S}" in form)
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    snap = json.loads(out.stdout)
    assert snap["log"]["lines_seen"] == len(lines) and len(snap["log"]["errors"]) >= 4
    assert all(REDACTED in e["message"] for e in snap["log"]["errors"] if "password" in e["message"]
               or "Bearer" in e["message"])
    leaked = [v for v in values if v in blob]
    record("secrets planted in log lines (events, errors, snapshot JSON)", tried=len(values), leaked=len(leaked))
    assert leaked == []


def test_secrets_in_server_info_are_redacted_as_decoded() -> None:
    s = [_secret() for _ in range(5)]
    info = {"api_key": s[0], "admin_api_key": s[1], "max_total_num_tokens": 1000,
            "launch_command": ["python", "-m", "sglang.launch_server", "--api-key", s[2], "--tp", "2"],
            "nested": [{"hf_token": s[3]}], "note": f"Bearer {s[4]}"}
    clean = redact_json(info)
    blob = json.dumps(clean)
    record("secrets planted in /server_info", tried=len(s), leaked=sum(v in blob for v in s))
    assert all(v not in blob for v in s)
    assert clean["max_total_num_tokens"] == 1000 and "--tp" in clean["launch_command"]
