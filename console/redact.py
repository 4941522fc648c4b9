"""Secrets out of anything the console shows or writes: log lines, launch commands, error text.

SGLang logs `server_args=ServerArgs(..., api_key='…')` at boot and reports `--api-key VALUE` in
/server_info's launch_command; Hugging Face tokens travel in environments. A cheap substring check
comes first, so a flood of ordinary lines costs almost nothing.
"""

from __future__ import annotations

import re

REDACTED = "‹redacted›"
# Decode lines say "#full token: …": the markers must not fire on them (that is the hot path).
_MARKERS = ("api_key", "API_KEY", "api-key", "_token", "_TOKEN", "token=", "TOKEN=", "-token", "hf_", "sk-",
            "secret", "SECRET", "password", "PASSWORD")
_PATTERNS = (
    # api_key='…', admin_api_key="…", HF_TOKEN=…, password=…  (ServerArgs reprs, env dumps); not the
    # "#full token: 412000" of a decode line, which has no '=' and no quoted key.
    re.compile(r"(\b(?:\w*api_key|\w*_token|token|\w*secret|\w*password)=['\"]?)"
               r"(?!None\b|null\b|False\b|True\b)([^'\"\s,)}]+)", re.IGNORECASE),
    # JSON: "api_key": "…"
    re.compile(r"([\"'](?:\w*api_key|\w*_token|\w*secret|\w*password)[\"']\s*:\s*[\"'])([^\"']+)", re.IGNORECASE),
    # --api-key VALUE, --admin-api-key=VALUE, --hf-token VALUE
    re.compile(r"(--[a-z-]*(?:api-key|token|secret|password)[ =])(\S+)", re.IGNORECASE),
    re.compile(r"()\bhf_[A-Za-z0-9]{12,}\b"),
    re.compile(r"()\bsk-[A-Za-z0-9_-]{12,}\b"),
)


def redact_text(text: str) -> str:
    if not any(m in text for m in _MARKERS):
        return text
    for pattern in _PATTERNS:
        text = pattern.sub(lambda m: m.group(1) + REDACTED, text)
    return text
