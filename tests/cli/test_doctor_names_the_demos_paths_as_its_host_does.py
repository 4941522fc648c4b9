"""`gpuconsole --demo doctor` listed 'path /tmp/gpusim-2wb_k623/shared/models/…': this machine's
sandbox of the simulated host, where every pane and the plan say '/shared/models/…'. Doctor names a
path as the host names it; the probe still reads the exact path (each is found present)."""

from __future__ import annotations

import json

from tests.kit.cli import gpuconsole


def test_the_demos_paths_are_named_as_its_host_names_them() -> None:
    out = gpuconsole("--demo", "doctor", "--json", "--runs", "2", timeout=120)
    assert out.returncode == 0, out.stderr
    paths = {c["name"]: c for c in json.loads(out.stdout)["checks"] if c["name"].startswith("path ")}
    assert set(paths) == {"path /shared/models/Qwen3.5-122B-A10B", "path /shared", "path /"}, sorted(paths)
    assert all(c["ok"] and c["detail"] == "present" for c in paths.values()), paths
