from __future__ import annotations

from pathlib import Path

import pytest

from console.config import ConfigError, HostProfile, load_config

SEEDS = Path(__file__).parent.parent.parent / "configs" / "seeds-host.toml"


def test_the_seeds_host_profile_loads_with_its_forbidden_prefix() -> None:
    config = load_config(SEEDS)
    profile = config.pick("seeds", None)
    assert profile.host == "10.1.230.174"
    assert profile.forbidden_prefixes == ("/data",)
    assert profile.model_dir == "/shared/models/Qwen3.5-122B-A10B"
    assert profile.unit == "sglang-qwen122b.service" and profile.compare_unit == "sglang-qwen397b.service"


def test_host_picks_the_profile_by_address_and_flags_override_it() -> None:
    config = load_config(SEEDS)
    profile = config.pick(None, "10.1.230.174").with_overrides({"model_dir": "/elsewhere", "user": None})
    assert profile.name == "seeds"
    assert profile.model_dir == "/elsewhere"
    assert profile.user == "root", "an unset flag must not erase the profile's value"


def test_unknown_host_gets_a_bare_profile() -> None:
    assert load_config(SEEDS).pick(None, "gpu-7") == HostProfile(name="gpu-7", host="gpu-7")


def test_env_var_points_at_the_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUCONSOLE_CONFIG", str(SEEDS))
    assert "seeds" in load_config().profiles


def test_missing_default_config_is_empty_but_missing_explicit_one_is_an_error(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("GPUCONSOLE_CONFIG", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert load_config().profiles == {}
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "nope.toml")


@pytest.mark.parametrize("text, message", [
    ("[profiles.a\nhost=1", "not valid TOML"),
    ("[profiles.a]\nhots = 'typo'", "unknown keys: hots"),
    ("[profiles.a]\nforbidden_prefixes = '/data'", "must be a list"),
])
def test_bad_config_is_one_clear_error(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "c.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_config(path)
