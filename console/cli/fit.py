"""`gpuconsole fit MODEL`: MODEL is a local directory, a directory on the host (with host options)
or a Hugging Face repo id. GPUs come from --gpus/--gpu-mem, or from the host's GPUs."""

from __future__ import annotations

import argparse
import json
import socket
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from console.domain.analysis.fit import FitInputs, plan_fit

INDEX = "model.safetensors.index.json"


class ModelError(Exception):
    """The model's files could not be read; one line for the operator."""


def _parse(config_raw: bytes, index_raw: bytes | None, where: str) -> tuple[dict[str, Any], int | None, list[str]]:
    notes = []
    try:
        config = json.loads(config_raw)
    except (ValueError, RecursionError) as exc:
        raise ModelError(f"{where}/config.json is not JSON: {exc}") from None
    if not isinstance(config, dict):
        raise ModelError(f"{where}/config.json is not a JSON object")
    total = None
    if index_raw is not None:
        try:
            meta = json.loads(index_raw).get("metadata") or {}
            total = int(meta["total_size"]) if isinstance(meta.get("total_size"), (int, float)) else None
        except (ValueError, AttributeError, OverflowError, RecursionError):
            notes.append(f"{INDEX} is not valid JSON: weight size unknown")
    else:
        notes.append(f"no {INDEX}: weight size unknown")
    return config, total, notes


def _local(path: Path) -> tuple[dict[str, Any], int | None, list[str]]:
    try:
        config_raw = (path / "config.json").read_bytes()
    except OSError as exc:
        raise ModelError(f"{path}/config.json: {exc.strerror}") from None
    index = path / INDEX
    single = path / "model.safetensors"
    if not index.exists() and single.exists():
        fake_index = json.dumps({"metadata": {"total_size": single.stat().st_size}}).encode()
        return _parse(config_raw, fake_index, str(path))
    try:
        index_raw = index.read_bytes() if index.exists() else None
    except OSError as exc:  # a directory, unreadable: the weights' size is then unknown, not a crash
        return _parse(config_raw, b"{}", str(path))[:2] + ([f"{INDEX}: {exc.strerror}: weight size unknown"],)
    return _parse(config_raw, index_raw, str(path))


async def _remote(session: Any, path: str) -> tuple[dict[str, Any], int | None, list[str]]:
    t = session.transport
    try:
        config_raw = await t.read_file(path.rstrip("/") + "/config.json", max_bytes=4 << 20)
    except FileNotFoundError:
        raise ModelError(f"{path}/config.json not found on {t.label}") from None
    try:
        index_raw = await t.read_file(path.rstrip("/") + "/" + INDEX, max_bytes=64 << 20)
    except FileNotFoundError:
        index_raw = None
    return _parse(config_raw, index_raw, f"{t.label}:{path}")


HUB_HINT = "pass a local model directory, or a directory on the host with --host/--profile"


def _hub_reachable(timeout_s: float = 3.0) -> str | None:
    """None when the Hub's endpoint accepts a TCP connection, else why not. huggingface_hub retries a
    refused or unresolvable endpoint for ~24 s before it gives up; this answers in at most `timeout_s`."""
    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        return "HF_HUB_OFFLINE is set"
    url = urlsplit(constants.ENDPOINT)
    host, port = url.hostname or "", url.port or (443 if url.scheme == "https" else 80)
    try:
        socket.create_connection((host, port), timeout=timeout_s).close()
    except ConnectionRefusedError:
        return f"{constants.ENDPOINT}: connection refused"
    except socket.gaierror:
        return f"{host}: name not resolved (offline?)"
    except OSError as exc:
        return f"{constants.ENDPOINT}: {exc.strerror or type(exc).__name__}"
    return None


def _hub(repo: str) -> tuple[dict[str, Any], int | None, list[str]]:
    from huggingface_hub import hf_hub_download

    try:  # the local cache first: it needs no network
        config_path = hf_hub_download(repo, "config.json", local_files_only=True)
        try:
            index_path: str | None = hf_hub_download(repo, INDEX, local_files_only=True)
        except Exception:  # noqa: BLE001 - not cached, or a single-file checkpoint
            index_path = None
        return _parse(Path(config_path).read_bytes(), Path(index_path).read_bytes() if index_path else None, repo)
    except Exception:  # noqa: BLE001 - not in the cache: ask the Hub below
        pass
    why = _hub_reachable()
    if why is not None:
        raise ModelError(f"{repo}: the Hugging Face Hub is not reachable ({why}) and the repo is not in the "
                         f"local cache: {HUB_HINT}")
    try:
        config_path = hf_hub_download(repo, "config.json", etag_timeout=5)
        try:
            index_path = hf_hub_download(repo, INDEX, etag_timeout=5)
        except Exception:  # noqa: BLE001 - a single-file checkpoint has no index
            index_path = None
    except Exception as exc:  # noqa: BLE001 - offline, unknown repo, gated: one line
        raise ModelError(f"{repo}: could not read config.json from the Hub ({type(exc).__name__}: "
                         f"{str(exc).splitlines()[0][:120] if str(exc) else ''})") from None
    return _parse(Path(config_path).read_bytes(), Path(index_path).read_bytes() if index_path else None, repo)


async def run_fit(args: argparse.Namespace, session: Any) -> int:
    try:
        repo_like = "/" in args.model and not args.model.startswith((".", "/", "~"))
        if Path(args.model).is_dir():  # noqa: ASYNC240 - one local stat
            config, total, notes = _local(Path(args.model))
        elif session is not None and repo_like and getattr(session, "demo", False):
            # `fit --demo Qwen/…`: a repo id, not a path relative to the simulator's sandbox (a
            # temporary directory named anew every run): the simulated host's copy of that repo.
            profile = session.profile
            if args.model != profile.repo_id or not profile.model_dir:
                raise ModelError(f"{args.model}: the simulated host holds only {profile.repo_id} "
                                 f"(gpuconsole fit --demo {profile.repo_id}); or give a local directory")
            config, total, notes = await _remote(session, profile.model_dir)
        elif session is not None:
            config, total, notes = await _remote(session, args.model)
        elif "/" in args.model and not args.model.startswith((".", "/")):
            config, total, notes = _hub(args.model)
        else:
            raise ModelError(f"{args.model}: no such directory (and not a repo id)")
    except ModelError as exc:
        print(f"gpuconsole: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:  # /proc/1/root/x: permission denied on the stat itself (issue 21, item 12)
        print(f"gpuconsole: {args.model}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    gpus, mem = args.gpus, args.gpu_mem
    if (gpus is None or mem is None) and session is not None:
        reading = await session.gpu_source().first_reading(15)
        healthy = [g for g in (reading.data.gpus if reading.data else ()) if g.memory_total_mib]
        if healthy:
            gpus = gpus or len(healthy)
            mem = mem or min(g.memory_total_mib for g in healthy) / 1024
    if gpus is None or mem is None:
        print("gpuconsole: give --gpus N and --gpu-mem GiB (or host options to read the host's GPUs)",
              file=sys.stderr)
        return 2
    result = plan_fit(FitInputs(
        config, total, gpus, mem, tp=args.tp or gpus, dtype=args.dtype, kv_cache_dtype=args.kv_cache_dtype,
        mem_fraction_static=args.mem_fraction, context_len=args.context_len,
        max_running_requests=args.max_running_requests, speculative_algorithm=args.speculative_algorithm,
        speculative_num_draft_tokens=args.speculative_num_draft_tokens,
        model=args.model.rstrip("/").rsplit("/", 1)[-1]))
    if notes:
        result = replace(result, warnings=result.warnings + tuple(notes))
    if args.json:
        print(json.dumps(result.to_json(), indent=2))
    else:
        from rich.console import Console

        from console.ui.panes.fit import format_fit

        out = Console(highlight=False)
        out.print(format_fit(result, width=out.width))  # wrapped under its own text at the terminal's width
    return 3 if result.fits is False else 0  # like `diff --fail-on-error`: a script can act on "does not fit"
