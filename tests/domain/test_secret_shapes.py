"""28 shapes a secret takes in what a host shows (a unit's ExecStart, a shell history line, a log,
an HTTP header, a URL), each redacted in a line and, where it is a command, in its argv
(issue 34, item 17: `curl --proxy-user bob:hunter2` and `curl -ubob:hunter2` passed, and 4 more
of the 28 below). Short `-p PASSWORD` options (sshpass, mysql, docker login) are not in the table:
`-p` is a port as often as a password, and the console's sources do not run those tools."""

from __future__ import annotations

import shlex

import pytest

from console.redact import REDACTED, redact_argv, redact_text
from tests.kit.figures import record

S = "Hx7kQ2mZ9pLw"
SHAPES = [
    # curl's credentials, every spelling
    f"curl -u bob:{S} http://h/", f"curl -ubob:{S} http://h/", f"curl --user bob:{S} http://h/",
    f"curl --user=bob:{S} http://h/", f"curl --proxy-user bob:{S} http://h/", f"curl --proxy-user=bob:{S} http://h/",
    f"curl -U bob:{S} http://h/",
    # environment, ExecStart and config lines
    f"HF_TOKEN={S}", f"Environment=\"HF_TOKEN={S}\"", f"AWS_SECRET_ACCESS_KEY={S}", f"aws_session_token = {S}",
    f"HUGGINGFACEHUB_API_TOKEN={S}", f"secret_key_base: {S}", f"AccountKey={S};EndpointSuffix=core.windows.net",
    f"--api-key={S}", f"--token {S}", f"wget --http-password {S} http://h/",
    # HTTP headers
    f"Authorization: token {S}", f"Proxy-Authorization: Basic {S}", f"X-Auth-Token: {S}", f"x-hf-token:{S}",
    f"api-key: {S}",
    # URLs
    f"https://x-access-token:{S}@github.com/o/r", f"ftp://anonymous:{S}@ftp.example/",
    f"https://hooks.slack.com/services/T0001/B0001/{S}",
    # bare tokens
    f"glpat-{S}abcdefgh", f"npm_{S}abcdefghijklmnopqrstu", f"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.{S}",
]


def _is_command(shape: str) -> bool:
    return shape.startswith(("curl ", "wget ", "--"))


def test_the_table_has_28_shapes() -> None:
    assert len(SHAPES) == len(set(SHAPES)) == 28


@pytest.mark.parametrize("shape", SHAPES)
def test_each_secret_shape_is_redacted_in_a_line_and_in_its_argv(shape: str) -> None:
    for line in (shape, f"[2026-01-01 10:00:00] ran: {shape} (exit 0)"):
        out = redact_text(line)
        assert S not in out and REDACTED in out, out
        assert redact_text(out) == out
    if _is_command(shape):
        argv = redact_argv(shlex.split(shape))
        assert S not in " ".join(argv), argv


def test_the_secret_shapes_for_the_fault_table() -> None:
    leaked = sum(S in redact_text(shape) or (_is_command(shape) and S in " ".join(redact_argv(shlex.split(shape))))
                 for shape in SHAPES)
    record("secret shapes (issue 34, 28 shapes)", tried=len(SHAPES), leaked=leaked)
    assert leaked == 0
