"""`gpuconsole --profile gpu-7` with no config file said only "no profile named 'gpu-7'": the
operator whose config.toml sits elsewhere could not tell where it was looked for. The error names
the path searched (XDG_CONFIG_HOME's, or GPUCONSOLE_CONFIG's), or the file read and its profiles."""

from __future__ import annotations

from pathlib import Path

from tests.kit.cli import gpuconsole


def test_no_config_file_names_the_path_searched(tmp_path: Path) -> None:
    out = gpuconsole("--profile", "gpu-7", "snapshot", env={"XDG_CONFIG_HOME": str(tmp_path / "cfg")})
    assert out.returncode == 2, out
    expected = str(tmp_path / "cfg" / "gpuconsole" / "config.toml")
    assert out.stderr.strip() == f"gpuconsole: no profile named 'gpu-7': no config file at {expected}", out.stderr


def test_a_config_without_the_profile_names_the_file_and_its_profiles(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[profiles.gpu-a]\nhost = "10.0.0.1"\n[profiles.gpu-b]\nhost = "10.0.0.2"\n')
    out = gpuconsole("--profile", "gpu-7", "snapshot", env={"GPUCONSOLE_CONFIG": str(config)})
    assert out.returncode == 2, out
    assert out.stderr.strip() == f"gpuconsole: no profile named 'gpu-7' in {config} (profiles: gpu-a, gpu-b)"
