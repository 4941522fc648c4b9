"""The one redaction function, property-tested: a generated secret in any of the forms SGLang, env,
HTTP and shells write it, anywhere in a line, never survives (issue 15, item 6)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from console.redact import REDACTED, redact_argv, redact_text

DATA = Path(__file__).parent.parent / "data"
FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])  # no clock (issue 27)

FORMS = [
    "api_key='{S}'", 'api_key="{S}"', "admin_api_key={S}", "HF_TOKEN={S}", "hf_token={S}", "HUGGING_FACE_HUB_TOKEN={S}",
    "password={S}", "client_secret={S}", "OPENAI_API_KEY={S}", "db_passwd={S}",
    '"api_key": "{S}"', "'api_key': '{S}'", "api_key: {S}", "x-api-key: {S}", "X-API-Key:{S}", "password: {S}",
    "Password = {S}", "secret: {S}", "access_token: {S}", "token={S}", "token: {S}",
    "--api-key {S}", "--api-key={S}", "--admin-api-key {S}", "--hf-token {S}", "--api_key {S}", "--hf_token={S}",
    "--password '{S}'", "--secret={S}",
    "Authorization: Bearer {S}", "authorization: Basic {S}", "Bearer {S}", "authorization={S}",
    "http://127.0.0.1:30000/v1/models?api-key={S}", "http://127.0.0.1/v1?x=1&token={S}&y=2", "/x?apikey={S}",
    "/usr/bin/env HF_TOKEN={S} /opt/venv/bin/python -m sglang.launch_server",
    # issue 21, item 5
    "--ssl-keyfile-password {S}", "--ssl-keyfile-password={S}", "PGPASSWORD={S}", "MYSQL_PWD={S}",
    "REDIS_PASSWORD={S}", "SMTPPASSWORD: {S}", "passphrase={S}", "key_passphrase: {S}",
    "https://user:{S}@example.com/x", "s3://AKEY:{S}@bucket/path", "postgres://u:{S}@db:5432/x",
    "redis://:{S}@cache:6379", "curl -u admin:{S} http://x", "curl -u admin:{S}", "curl --user admin:{S}",
    "Cookie: session={S}", "cookie: a=1; sid={S}", "Set-Cookie: sid={S}; HttpOnly",
    "-----BEGIN RSA PRIVATE KEY-----\n{S}\n-----END RSA PRIVATE KEY-----",
    "-----BEGIN PRIVATE KEY----- {S}", "-----BEGIN OPENSSH PRIVATE KEY-----{S}",
]
# quoted values whose secret holds spaces: the whole value goes, not just its first word
QUOTED = ["api_key='{S} {T}'", 'password="{S} {T}"', "--password '{S} {T}'", '"api_key": "{S} {T}"',
          "client_secret='{S} {T} {S}'", "PGPASSWORD='{S} {T}'"]
BARE = ["hf_{A}", "sk-{A}", "sk-proj-{A}", "ghp_{A}", "gho_{A}", "github_pat_{A}", "xoxb-{A}", "xoxp-1-{A}",
        "AKIA{U}"]

# Secrets may start with digits (a found leak: `token=66vQ…`); only an all-digit `token` value is a count.
secret = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._~+/=-]{7,40}", fullmatch=True).filter(
    lambda s: not s.lower().startswith(("none", "null", "true", "false", "bearer", "basic"))
    and not s.isdigit())
numeric_secret = st.from_regex(r"[0-9]{6,20}", fullmatch=True)
alnum = st.from_regex(r"[A-Za-z0-9]{6,40}", fullmatch=True).filter(lambda s: not s.startswith("transfer"))
filler = st.text(alphabet=st.sampled_from(list("abcdefXYZ0123 ,.:;()[]#/|") + ["é", "\t"]), max_size=40)


def _clean(text: str, value: str) -> None:
    out = redact_text(text)
    assert value not in out, (text, out)
    assert REDACTED in out
    assert redact_text(out) == out  # idempotent


@FAST
@given(form=st.sampled_from(FORMS), value=secret, before=filler, after=filler)
def test_a_secret_in_any_form_anywhere_in_a_line_is_redacted(form: str, value: str, before: str, after: str) -> None:
    _clean(f"{before} {form.format(S=value)}", value)
    _clean(f"{form.format(S=value)} {after}", value)
    _clean(f"{before} {form.format(S=value)} {after}", value)
    _clean(form.format(S=value), value)


@FAST
@given(form=st.sampled_from([f for f in FORMS if "oken" not in f and "OKEN" not in f and "Bearer" not in f
                             and "Basic" not in f]), value=numeric_secret)
def test_an_all_digit_password_or_api_key_is_redacted(form: str, value: str) -> None:
    _clean(form.format(S=value), value)


@FAST
@given(form=st.sampled_from(QUOTED), value=secret, tail=secret, before=filler)
def test_a_quoted_secret_with_spaces_is_redacted_whole(form: str, value: str, tail: str, before: str) -> None:
    text = f"{before} {form.format(S=value, T=tail)}"
    out = redact_text(text)
    assert value not in out and tail not in out, (text, out)
    assert redact_text(out) == out


@FAST
@given(value=secret, flag=st.sampled_from(["-u", "--user"]))
def test_curl_credentials_as_two_argv_words(value: str, flag: str) -> None:
    out = redact_argv(["curl", flag, f"admin:{value}", "http://x"])
    assert value not in " ".join(out) and out[2] == f"admin:{REDACTED}"


@FAST
@given(form=st.sampled_from(BARE), value=alnum, before=filler, after=filler)
def test_bare_hub_and_openai_tokens_short_or_long_are_redacted(form: str, value: str, before: str, after: str) -> None:
    token = form.format(A=value, U=value.upper().ljust(16, "X"))
    _clean(f"{before} {token} {after}", token)
    _clean(f"{before}({token})", token)


@FAST
@given(value=secret, key=st.sampled_from(["api_key", "hf_token", "password", "x-api-key", "admin_api_key"]),
       depth=st.integers(0, 3))
def test_secrets_inside_json_at_any_depth(value: str, key: str, depth: int) -> None:
    doc: object = {key: value, "model_path": "/models/x"}
    for _ in range(depth):
        doc = {"nested": [doc]}
    _clean(json.dumps(doc), value)


@FAST
@given(value=secret, flag=st.sampled_from(["--api-key", "--admin-api-key", "--hf-token", "--api_key", "--password"]),
       position=st.integers(0, 4))
def test_secrets_in_argv_words(value: str, flag: str, position: int) -> None:
    argv = ["/opt/venv/bin/python", "-m", "sglang.launch_server", "--model-path", "/m", "--tp-size", "2"]
    argv[position + 3:position + 3] = [flag, value]
    out = redact_argv(argv)
    assert value not in " ".join(out) and REDACTED in out
    assert redact_argv(["/usr/bin/env", f"HF_TOKEN={value}", "python"])[1] == f"HF_TOKEN={REDACTED}"


def test_ordinary_sglang_lines_are_left_alone() -> None:
    lines = (DATA / "sglang_real_lines.txt").read_text().splitlines()
    changed = [line for line in lines if redact_text(line) != line]
    assert changed == []
    for line in ["Decode batch. #running-req: 1, #token: 1234, token usage: 0.01, #new-token: 5, "
                 "gen throughput (token/s): 12.3", "max_total_num_tokens=935444, max_prefill_tokens=16384",
                 "Basic setup done", "pip install hf_transfer", "KV cache key dtype: fp8"]:
        assert redact_text(line) == line


def test_every_form_with_fixed_secrets_for_the_fault_table() -> None:
    """The same forms, deterministic: the fault suite's figure (issue 21, item 5)."""
    from tests.kit.figures import record

    values = ["hunter2hunter2", "Zx9_Qw-8.Er7", "0123456789ab", "s3cr3t/with+slash="]
    tried = leaked = 0
    for form in FORMS:
        for value in values:
            for text in (form.format(S=value), f"x {form.format(S=value)} y"):
                tried += 1
                leaked += value in redact_text(text)
    for form in QUOTED:
        tried += 1
        leaked += "tail-part" in redact_text(form.format(S="head", T="tail-part"))
    record("secret forms (issue 15 and 21)", tried=tried, leaked=leaked)
    assert leaked == 0


# Each bare token shape with the alphabet its issuer really uses (underscores and dashes included):
# the whole token goes, not a prefix of it up to its first `_` or `-`.
REAL_SHAPES = {
    "hugging face": "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz01234567",
    "openai project key": "sk-proj-" + "Ab12_cd-34EF_gh56-IJ78_kl90-MN12_op34-QR56_st78-UV90_wx12",
    "openai service key": "sk-svcacct-" + "Zz9_Yy8-Xx7_Ww6-Vv5_Uu4-Tt3_Ss2-Rr1_Qq0",
    "github classic": "ghp_" + "aB3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF3hJ6",
    "github oauth": "gho_" + "16C7e42F292c6912E7710c838347Ae178B4a",
    "github fine-grained": "github_pat_" + "11ABCDEFG0abcdefghijkl_MNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKL",
    "slack bot": "xoxb-" + "1234567890-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
    "aws access key": "AKIA" + "IOSFODNN7EXAMPLE",
}


@pytest.mark.parametrize("token", REAL_SHAPES.values(), ids=list(REAL_SHAPES))
def test_a_bare_token_of_each_real_shape_is_redacted_whole(token: str) -> None:
    for line in (f"cloning with {token} now", f"{token}", f"url=https://x/?a=1 {token}, next"):
        out = redact_text(line)
        assert out == line.replace(token, REDACTED), out
    assert redact_argv(["hf", "download", "--quiet", token]) == ("hf", "download", "--quiet", REDACTED)
