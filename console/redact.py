"""Secrets out of anything the console shows or writes: the one redaction function.

Applied at the source (the log follower before parsing, unit text and argv as they are read,
/server_info as it is decoded), so events, errors, reasons, JSON, recordings and panes downstream
only ever hold redacted text. Forms covered, each property-tested with generated secrets
(tests/domain/test_redact.py):

    api_key='…'  HF_TOKEN=…  admin_api_key="…"  password=…      (ServerArgs reprs, env, env(1) argv)
    "api_key": "…"  api_key: …  x-api-key: …  password: …       (JSON, YAML, HTTP headers)
    --api-key …  --api-key=…  --hf-token …  --api_key …         (command lines)
    Authorization: Bearer …  Bearer …  ?api-key=…&token=…       (headers, URLs)
    hf_…  sk-…  ghp_…  github_pat_…  xoxb-…  AKIA…               (bare tokens anywhere)
    --ssl-keyfile-password …  PGPASSWORD=…  passphrase=…        (any *password*, *passphrase*)
    https://u:pw@host  s3://k:pw@b  curl -u a:pw  --user a:pw    (credentials in URLs and -u)
    api_key='a b c'  password="with spaces"                     (a quoted value, whole)
    Cookie: …  Set-Cookie: …                                    (the whole header value)
    -----BEGIN … PRIVATE KEY----- … -----END … PRIVATE KEY-----  (PEM private keys)

A cheap substring check comes first, so a flood of ordinary lines costs almost nothing. Decode
lines' `#new-token: 412` and `max_total_num_tokens=…` are not secrets and stay as they are.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

REDACTED = "‹redacted›"

# One search decides whether a line needs the patterns at all; decode lines (`#new-token: 12`,
# `token usage: 0.01`) do not.
# Runs of name characters are bounded ({0,64}): unbounded, `--no-` repeated 4,000 times cost
# seconds of backtracking (quadratic; issue 21, item 12).
_MAYBE = re.compile(r"key|secret|passw|passphrase|pwd|bearer|basic|hf_|sk-|auth|cred|--[\w-]{0,64}token"
                    r"|token['\"]?\s*[=:](?!\s*['\"]?\d+(?:[\s,;)}\]'\"]|$))"
                    r"|://[^\s/@]*:[^\s@]*@|(?<![\w-])-[uU]\s*['\"]?[^\s:'\"]*:|--user|--proxy-user|cookie|ghp_|gho_|ghs_|ghu_"
                    r"|ghr_|github_pat_|xox[abposr]-|AKIA|PRIVATE KEY|glpat-|npm_|eyJ|hooks\.slack\.com/",
                    re.IGNORECASE)

# A key name that holds a secret: *api_key, *api-key, apikey, *_token, *-token, token, *secret*,
# *password, passwd, credentials, auth (as a whole word), authorization.
_KEY_STRONG = (r"(?:[A-Za-z0-9_-]{0,64}?(?:api[_-]?key|access[_-]?key|secret[_-]?key(?:[_-]base)?"
               r"|private[_-]?key|account[_-]?key)"
               r"|[A-Za-z0-9_-]{0,64}?(?:secret|password|passwd|passphrase)"  # PGPASSWORD, ssl-keyfile-password
               r"|(?:[A-Za-z0-9_]{0,64}[_-])?(?:pwd|credentials?)"
               r"|auth)")
# `token` keys: a value of digits only is a count (`#new-token: 412`), not a secret.
_KEY_TOKEN = r"(?:[A-Za-z0-9_-]{0,64}[_-])?token"  # X-Auth-Token, x-hf-token
_KEY = f"(?:{_KEY_STRONG}|{_KEY_TOKEN})"
_VALUE_STOP = r"[^\s'\",;&)}\]]"
_SKIP = r"(?!None\b|null\b|False\b|True\b|none\b|\*\*\*|‹redacted›|Bearer\s|Basic\s)"

_PATTERNS: tuple[re.Pattern[str], ...] = (
    # PEM private keys: the body (to the END line, or to the end of the text when it is cut)
    re.compile(r"(-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----)(?!‹redacted›)([\s\S]*?(?=-----END [A-Z0-9 ]*PRIVATE KEY-----)"
               r"|[\s\S]+$)"),
    # a quoted value, whole (spaces and all): key='a b', --password "x y", "api_key": "a b"
    re.compile(r"((?<![\w-])(?:--)?['\"]?" + _KEY_STRONG + r"['\"]?(?:\s*[=:]\s*|\s+)(['\"]))(?!‹redacted›)"
               r"((?:(?!\2).)*?\s(?:(?!\2).)*)(?=\2)", re.IGNORECASE),
    # Cookie: / Set-Cookie: the whole value
    re.compile(r"(\b(?:set-)?cookie['\"]?\s*[:=]\s*)(?!\s*‹redacted›)(\S[^\n'\"]*)", re.IGNORECASE),
    # credentials in URLs: scheme://user:PASSWORD@host
    re.compile(r"(\b[a-z][a-z0-9+.-]*://[^\s/@:'\"]*:)(?!‹redacted›@)([^\s@'\"]+)(?=@)", re.IGNORECASE),
    # curl -u user:PASSWORD, -uuser:PASSWORD, --user user:PASSWORD, --proxy-user / -U (its short form)
    re.compile(r"((?:(?<![\w-])-[uU]\s*|--(?:proxy-)?user(?:=|\s+))['\"]?[^\s:'\"]*:)(?!‹redacted›)([^\s'\"]+)"),
    # Authorization: Bearer X / Basic X / X, and a bare "Bearer X"
    re.compile(r"(\bauthorization['\"]?\s*[:=]\s*['\"]?(?:(?:Bearer|Basic|Digest|Token)\s+)?)"
               r"(?!‹redacted›|(?:Bearer|Basic|Digest|Token)\s)"
               r"([^\s'\",;}]+)", re.IGNORECASE),
    re.compile(r"(\bBearer\s+)(?!‹redacted›)([A-Za-z0-9._~+/=-]{4,})", re.IGNORECASE),
    # --api-key VALUE, --admin-api-key=VALUE, --hf-token VALUE, --api_key VALUE, -p? no: long options only
    re.compile(r"(--" + _KEY + r"(?:=|\s+)['\"]?)" + _SKIP + r"(" + _VALUE_STOP + r"+)", re.IGNORECASE),
    # key=value, key: value, "key": "value", key='value'; for token keys not a decode line's `#new-token: 412`
    re.compile(r"((?<![\w-])['\"]?" + _KEY_STRONG + r"['\"]?\s*[=:]\s*['\"]?)" + _SKIP + r"("
               + _VALUE_STOP + r"+)", re.IGNORECASE),
    re.compile(r"((?<![\w-])['\"]?" + _KEY_TOKEN + r"['\"]?\s*[=:]\s*['\"]?)" + _SKIP + r"(?!\d+(?:[\s,;)}\]'\"]|$))("
               + _VALUE_STOP + r"+)", re.IGNORECASE),
    # ?api-key=…, &token=… in URLs (the key may sit right after ? or &)
    re.compile(r"([?&]" + _KEY + r"=)" + r"([^&\s#'\"]+)", re.IGNORECASE),
    # Hugging Face and OpenAI-style tokens anywhere (hf_transfer is a package, not a token)
    re.compile(r"()(?<![A-Za-z0-9])hf_(?!transfer\b)[A-Za-z0-9]{6,}"),
    re.compile(r"()(?<![A-Za-z0-9])sk-[A-Za-z0-9_-]{6,}"),
    # GitHub, Slack and AWS access tokens anywhere
    re.compile(r"()(?<![A-Za-z0-9])(?:gh[pousr]_[A-Za-z0-9]{6,}|github_pat_[A-Za-z0-9_]{6,}"
               r"|xox[abposr]-[A-Za-z0-9-]{6,}|AKIA[0-9A-Z]{12,})"),
    # GitLab and npm access tokens, JSON Web Tokens (header.payload.signature), a Slack webhook's path
    re.compile(r"()(?<![A-Za-z0-9])(?:glpat-[A-Za-z0-9_-]{12,}|npm_[A-Za-z0-9]{20,}"
               r"|eyJ[A-Za-z0-9_-]{6,}\.eyJ[A-Za-z0-9_-]{6,}\.[A-Za-z0-9_-]{6,})"),
    re.compile(r"(hooks\.slack\.com/services/)(?!‹redacted›)([A-Za-z0-9/_-]+)", re.IGNORECASE),
)


# `_MAYBE` again, one literal per alternative (each alternative contains its literal, so a line
# without any of them cannot match), with the alternative's regex where it is more than the
# literal. Found with `in` on the lowercased line: a 230-character decode line took `_MAYBE`
# 136-190 µs on the 2-core VM (re's IGNORECASE alternation tries every branch at every offset),
# 56 % of the console's CPU in a 20k lines/s flood (py-spy); now a few µs. ASCII only: Unicode
# case folding (re.IGNORECASE matches `ſ` as `s`) goes through `_MAYBE` itself.
# `--[\w-]{0,64}token|token['"]?\s*[=:](?!…)` checked at each "token" only (searching the whole
# line for it was most of what was left of a decode line's cost: it has two "token"s).
_TOKEN_AFTER = re.compile(r"['\"]?\s*[=:](?!\s*['\"]?\d+(?:[\s,;)}\]'\"]|$))")
_DASHES_BEFORE = re.compile(r"--[\w-]{0,64}\Z")


class _TokenAt:
    """A `search` that is true where `_MAYBE`'s two token alternatives match (ASCII, lowered)."""

    @staticmethod
    def search(text: str) -> object | None:
        low = text.lower()
        i = low.find("token")
        while i >= 0:
            if _TOKEN_AFTER.match(low, i + 5) or _DASHES_BEFORE.search(low, max(0, i - 66), i):
                return True
            i = low.find("token", i + 5)
        return None


_TOKEN_MAYBE = _TokenAt()
_NEEDLES: tuple[tuple[str, re.Pattern[str] | _TokenAt | None], ...] = (
    *((word, None) for word in ("key", "secret", "passw", "passphrase", "pwd", "bearer", "basic", "hf_", "sk-",
                                "auth", "cred", "cookie", "ghp_", "gho_", "ghs_", "ghu_", "ghr_", "github_pat_",
                                "akia", "private key", "--proxy-user", "glpat-", "npm_", "eyj",
                                "hooks.slack.com/")),
    ("token", _TOKEN_MAYBE),
    ("://", re.compile(r"://[^\s/@]*:[^\s@]*@")),
    ("-u", re.compile(r"(?<![\w-])-[uU]\s*['\"]?[^\s:'\"]*:|--user", re.IGNORECASE)),
    ("xox", re.compile(r"xox[abposr]-", re.IGNORECASE)),
)


def maybe_secret(text: str) -> bool:
    """Whether `text` needs the patterns at all: exactly `_MAYBE.search(text) is not None`."""
    if not text.isascii():
        return _MAYBE.search(text) is not None
    low = text.lower()
    return any(needle in low and (pattern is None or pattern.search(text) is not None) for needle, pattern in _NEEDLES)


def redact_text(text: str) -> str:
    """`text` with every secret value replaced by ‹redacted›; the keys stay, so the reader knows."""
    if not text:
        return text
    if not maybe_secret(text):
        return text
    for pattern in _PATTERNS:
        text = pattern.sub(lambda m: m.group(1) + REDACTED, text)
    return text


def redact_argv(argv: Sequence[str]) -> tuple[str, ...]:
    """An argv with secret values redacted: `--api-key VALUE` (two words) as well as one-word forms."""
    out: list[str] = []
    secret_next = user_next = False
    for word in argv:
        if secret_next and not word.startswith("--"):
            out.append(REDACTED)
            secret_next = False
            continue
        if user_next and ":" in word:  # curl -u USER:PASSWORD as two words
            out.append(word.split(":", 1)[0] + ":" + REDACTED)
            user_next = False
            continue
        secret_next = False
        user_next = word in ("-u", "--user", "--proxy-user", "-U")
        if re.fullmatch(r"--" + _KEY, word, re.IGNORECASE):
            secret_next = True
            out.append(word)
            continue
        out.append(redact_text(word))
    return tuple(out)


_SECRET_KEY = re.compile(r"[\w-]*(?:api[_-]?key|apikey|token|secret|password|passwd|credentials?|authorization)",
                         re.IGNORECASE)
_MAX_DEPTH = 64


def redact_json(value: object, _depth: int = 0) -> object:
    """A decoded JSON document (/server_info) with secret values replaced, at any depth.

    A value under a secret-looking key (`api_key`, `hf_token`, `admin_api_key`) is replaced
    whole; every other string goes through `redact_text`, and a list of strings (an argv) through
    `redact_argv`. Deeper than 64 levels is cut: no server sends that, and recursion must end.
    """
    if _depth > _MAX_DEPTH:
        return REDACTED
    if isinstance(value, dict):
        out: dict[object, object] = {}
        for k, v in value.items():
            secret = isinstance(k, str) and _SECRET_KEY.fullmatch(k) and not k.endswith(("tokens", "_len"))
            out[k] = REDACTED if secret and v not in (None, True, False, "") and not isinstance(v, (dict, list)) \
                else redact_json(v, _depth + 1)
        return out
    if isinstance(value, list):
        if value and all(isinstance(x, str) for x in value):
            return list(redact_argv(value))  # type: ignore[arg-type]
        return [redact_json(x, _depth + 1) for x in value]
    if isinstance(value, str):
        return redact_text(value)
    return value
