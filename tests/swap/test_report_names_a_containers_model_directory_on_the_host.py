"""The report's "Old → new" for SGLang in containers: the row names containers, and the old
model's directory is its container's --model-path read through the container's bind mount (the
host's path, as the new model's directory is), not the path inside the container; a path under no
mount is said as the container has it. The in-place path's words name no unit."""

from __future__ import annotations

import copy
import json

from console.demo.hostsim.downloader import qwen122b_config
from console.domain.analysis.container_diff import side_from_container
from console.domain.analysis.service_report import side_from_text
from console.domain.swap import paths
from console.domain.swap.report import _in_container, _model_dir_on_host
from console.host.parsers.docker import parse_inspect


def _container(model_path: str, binds: list[tuple[str, str]]) -> object:
    obj = {"Id": "a" * 64, "Name": "/sglang-old", "Image": "sha256:" + "b" * 64,
           "Args": ["-m", "sglang.launch_server", "--model-path", model_path, "--port", "30000"],
           "Path": "python3", "State": {"Status": "running", "Running": True, "Pid": 7},
           "HostConfig": {"Binds": [f"{s}:{d}:ro" for s, d in binds], "NetworkMode": "host"},
           "Mounts": [{"Type": "bind", "Source": s, "Destination": d, "Mode": "ro", "RW": False} for s, d in binds],
           "Config": {"Image": "lmsysorg/sglang:v0.5.23-cu129", "Cmd": None, "Env": [], "Labels": {}}}
    (spec,) = parse_inspect(json.dumps([obj]))
    return side_from_container(spec)


def test_the_old_containers_model_directory_is_read_through_its_mount() -> None:
    side = _container("/models/Qwen3.5-122B-A10B", [("/shared/models", "/models"), ("/srv/cache", "/models/cache")])
    assert _in_container(side)
    assert _model_dir_on_host(side) == "/shared/models/Qwen3.5-122B-A10B"
    assert _model_dir_on_host(_container("/models/cache/x", [("/shared/models", "/models"),
                                                             ("/srv/cache", "/models/cache")])) == "/srv/cache/x"
    assert _model_dir_on_host(_container("/models", [("/shared/models", "/models")])) == "/shared/models"
    assert _model_dir_on_host(_container("/opt/m", [("/shared/models", "/models")])) == "/opt/m"  # under no mount


def test_a_units_model_directory_is_its_own() -> None:
    side = side_from_text("old.service", "[Service]\nExecStart=/opt/sglang/.venv/bin/python -m sglang.launch_server "
                                         "--model-path /models/x\n")
    assert not _in_container(side) and _model_dir_on_host(side) == "/models/x"


def test_the_in_place_paths_words_fit_a_container_as_well_as_a_unit() -> None:
    cfg = qwen122b_config()
    option = paths.in_place_option(cfg, copy.deepcopy(cfg))
    assert option.possible and not any(" unit" in line for line in option.details), option.details
