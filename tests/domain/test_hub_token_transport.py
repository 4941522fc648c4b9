"""The operator's Hub token goes only where the config would take it (issue 34, item 7): a real
profile sent `Authorization: Bearer hf_…` over plain http to a mirror."""

from __future__ import annotations

from typing import Any

import pytest

from console.hub import HubAccess, fetch_expected


class _Info:
    siblings: list[Any] = []


@pytest.mark.parametrize(("endpoint", "sends"), [
    ("http://hf-mirror.example.internal", False), ("http://169.254.169.254", False), ("https://169.254.169.254", False),
    ("https://hf-mirror.example.internal", True), ("http://127.0.0.1:8080", True), (None, True)])
def test_the_token_is_sent_only_over_https_or_to_loopback(monkeypatch: pytest.MonkeyPatch, endpoint: str | None,
                                                          sends: bool) -> None:
    import huggingface_hub

    asked: list[object] = []

    def model_info(self: object, repo_id: str, **kw: Any) -> _Info:
        asked.append(kw["token"])
        return _Info()

    monkeypatch.setattr(huggingface_hub.HfApi, "model_info", model_info)
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    fetch_expected("org/model", access=HubAccess(endpoint=endpoint, use_cache=False))
    assert asked == ([None] if sends else [False])  # None: huggingface_hub sends the saved token


def test_an_http_hf_endpoint_from_the_environment_gets_no_token(monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub

    asked: list[object] = []
    monkeypatch.setattr(huggingface_hub.HfApi, "model_info", lambda self, repo_id, **kw: asked.append(kw["token"])
                        or _Info())
    monkeypatch.setenv("HF_ENDPOINT", "http://10.0.0.7:8080")
    fetch_expected("org/model", access=HubAccess(use_cache=False))
    assert asked == [False]
