from __future__ import annotations

import pytest

from console.host.parsers import ParseError
from console.host.parsers.host import parse_df, parse_host_summary
from tests.kit.hosts import DATA


def test_recorded_host_summary_parses() -> None:
    text = (DATA / "host_summary_debian12.txt").read_text()
    s = parse_host_summary(text, ["/", "/work", "/nonexistent"])
    assert s.hostname
    assert s.uptime_s and s.uptime_s > 0
    assert s.cpus == 2
    assert s.load_1m is not None and s.load_15m is not None
    # df skips a path that does not exist, so paths cannot be matched by position.
    assert len(s.disks) == 2 and all(d.path == "" for d in s.disks)
    assert all(d.size_bytes >= d.avail_bytes > 0 for d in s.disks)


def test_df_matches_paths_when_every_path_answered() -> None:
    text = ("Filesystem 1-blocks Used Available Capacity Mounted on\n"
            "/dev/sda1 1000 400 600 40% /\n/dev/sdb1 2000 100 1900 5% /shared data\n")
    disks = parse_df(text, ["/root", "/shared data/models"])
    assert [(d.path, d.mount, d.avail_bytes) for d in disks] == [
        ("/root", "/", 600), ("/shared data/models", "/shared data", 1900)]


def test_garbled_df_line_names_the_line() -> None:
    with pytest.raises(ParseError, match="line 2"):
        parse_df("Filesystem x\n/dev/sda1 lots\n", ["/"])


def test_missing_sections_are_none_not_guesses() -> None:
    s = parse_host_summary("@@hostname\nbox\n", [])
    assert (s.hostname, s.uptime_s, s.load_1m, s.cpus, s.disks) == ("box", None, None, None, ())
    with pytest.raises(ParseError):
        parse_host_summary("garbage", [])
