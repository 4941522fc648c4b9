"""The operator's Hub token goes only where the config would take it (issue 34, item 7): a real
profile sent `Authorization: Bearer hf_…` over plain http to a mirror. The request itself is the
bounded client's (console/host/hub.py fetch_model_info; its redirects in tests/hostile/test_hub_answers_bounded.py):
here, which token it is handed."""

from __future__ import annotations

from typing import Any

import pytest

import console.host.hub
from console.host.hub import HubAccess, fetch_expected

TOKEN = "hf_" + "Q" * 34


def _asked(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    asked: list[object] = []

    def fetch_model_info(repo_id: str, revision: str, endpoint: str | None, token: str | None, *a: Any,
                         **kw: Any) -> dict[str, Any]:
        asked.append(token)
        return {"siblings": []}

    monkeypatch.setattr(console.host.hub, "fetch_model_info", fetch_model_info)
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    return asked


@pytest.mark.parametrize(("endpoint", "sends"), [
    ("http://hf-mirror.example.internal", False), ("http://169.254.169.254", False), ("https://169.254.169.254", False),
    ("https://hf-mirror.example.internal", True), ("http://127.0.0.1:8080", True), (None, True)])
def test_the_token_is_sent_only_over_https_or_to_loopback(monkeypatch: pytest.MonkeyPatch, endpoint: str | None,
                                                          sends: bool) -> None:
    asked = _asked(monkeypatch)
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    fetch_expected("org/model", access=HubAccess(endpoint=endpoint, use_cache=False))
    assert asked == ([TOKEN] if sends else [None])


def test_an_http_hf_endpoint_from_the_environment_gets_no_token(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = _asked(monkeypatch)
    monkeypatch.setenv("HF_ENDPOINT", "http://10.0.0.7:8080")
    fetch_expected("org/model", access=HubAccess(use_cache=False))
    assert asked == [None]


def test_the_simulators_hub_never_gets_the_token(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = _asked(monkeypatch)
    fetch_expected("org/model", access=HubAccess(endpoint="http://127.0.0.1:9", send_token=False, use_cache=False))
    assert asked == [None]
