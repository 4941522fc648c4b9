"""A profile's Hub mirror and router are where a token goes (issue 34, item 7): any host was taken
(169.254.169.254, a leading `-`), and a real profile sent `Authorization: Bearer hf_…` over plain
http. Only https, or http to loopback."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.config import ConfigError, _profile_from_table

REFUSED = ["http://169.254.169.254/latest/meta-data", "https://169.254.169.254/", "http://hf-mirror.example.internal",
           "http://10.0.0.7:8080", "-oProxyCommand=x", "https://-evil.example/", "https://u:pw@hf.example/",
           "http://[fe80::1]:30080", "http://0.0.0.0:30080", "ftp://hf.example/"]
TAKEN = ["https://hf-mirror.example.internal", "https://huggingface.co", "http://127.0.0.1:30080",
         "http://localhost:8080", "http://[::1]:30080", "https://10.0.0.7:8443"]


@pytest.mark.parametrize("key", ["hub_endpoint", "router_url"])
@pytest.mark.parametrize("url", REFUSED)
def test_a_profile_refuses_an_endpoint_a_token_must_not_reach(tmp_path: Path, key: str, url: str) -> None:
    with pytest.raises(ConfigError) as err:
        _profile_from_table("p", {key: url}, tmp_path / "config.toml")
    assert key in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("url", TAKEN)
def test_https_anywhere_and_http_to_loopback_are_taken(tmp_path: Path, url: str) -> None:
    assert _profile_from_table("p", {"hub_endpoint": url}, tmp_path / "c").hub_endpoint == url
    if url.count("/") <= 2 or url.endswith(":30080") or url.endswith(":8080") or url.endswith(":8443"):
        assert _profile_from_table("p", {"router_url": url}, tmp_path / "c").router_url == url
