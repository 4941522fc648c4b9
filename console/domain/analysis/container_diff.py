"""Two SGLang containers (or compose services) compared as SGLang reads them: the launch
command with SGLang's argparse semantics (the same diff as two units), and what only a container
has: the image (an SGLang version change), mounts (a model path not mounted is an error; the
forbidden prefixes apply to host paths), GPUs against TP, shared memory and IPC (TP needs shared
memory), ports, the restart policy, a container restarting in a loop. Pure.

Container facts become `FlagChange`s of category "container" and `Lint`s, so the diff pane, the
raw diff and `gpuconsole diff --json` show them without a second report format.
"""

from __future__ import annotations

import posixpath
from dataclasses import replace

from console.domain.analysis.service_diff import FlagChange, HostFacts, Lint, redact_env
from console.domain.analysis.service_report import ServiceReport, ServiceSide, build_report
from console.host.parsers.docker import ContainerSpec, sglang_version_of_image
from console.host.parsers.sglang_argv import NotSglang, normalize
from console.host.parsers.sglang_flags import FlagTable, builtin_table
from console.redact import redact_text

CONTAINER = "container"
DOCKER_DEFAULT_SHM = 64 * 1024**2
MIN_TP_SHM = 1024**3  # below this NCCL's shared-memory transport fails at TP > 1 (SGLang's docs use 32g or --ipc=host)


def _gib(n: int | None) -> str:
    if n is None:
        return "default (64 MiB)"
    return f"{n / 1024**3:g} GiB" if n >= 1024**3 else f"{n / 1024**2:g} MiB"


def container_text(spec: ContainerSpec) -> str:
    """The container's launch as lines (for the raw diff), secrets redacted."""
    lines = [f"# {spec.source}: {spec.name}", f"image: {spec.image}"]
    lines += [f"mount: {m.source} -> {m.destination}{' (ro)' if m.read_only else ''}" for m in spec.mounts]
    lines.append(f"gpus: {spec.gpus.describe if spec.gpus else 'none'}")
    lines.append(f"shm-size: {_gib(spec.shm_size_bytes)}  ipc: {spec.ipc_mode or 'default'}")
    lines += [f"port: {p}" for p in spec.ports]
    lines.append(f"restart: {spec.restart_policy or 'no'}")
    lines += [f"env-file: {f}" for f in spec.env_files]
    lines += [f"env: {k}={redact_env(k, v)}" for k, v in spec.env if k != "PATH"]
    lines.append("command: " + " ".join(spec.argv))
    return redact_text("\n".join(lines)) + "\n"


def side_from_container(spec: ContainerSpec, table: FlagTable | None = None) -> ServiceSide:
    table = table or builtin_table()
    text = container_text(spec)
    env = {k: v for k, v in spec.env if k != "PATH"}
    safe_env = {k: (redact_env(k, v) or "") for k, v in env.items()}
    state = spec.state
    active = None if state is None else ("active" if state.running else (state.status or "inactive"))
    try:
        command = normalize(list(spec.argv), table)
    except NotSglang:
        return ServiceSide(spec.name, text, None, None, safe_env, active_state=active,
                           started_at_s=state.started_at_s if state else None,
                           finished_at_s=state.finished_at_s if state else None,
                           error=f"{spec.name}: the container's command does not run SGLang "
                                 f"(image {spec.image}: `python3 -m sglang.launch_server` or `sglang serve` expected)")
    return ServiceSide(spec.name, text, None, command, safe_env, active_state=active,
                       main_pid=state.pid if state else None,
                       started_at_s=state.started_at_s if state else None,
                       finished_at_s=state.finished_at_s if state else None)


def _host_path(path: str, spec: ContainerSpec) -> str | None:
    """The host path behind a path inside the container (None: not under any bind mount)."""
    path = posixpath.normpath(path)
    best = None
    for m in spec.mounts:
        dest = posixpath.normpath(m.destination)
        inside = path == dest or path.startswith(dest.rstrip("/") + "/")
        if inside and (best is None or len(dest) > len(posixpath.normpath(best.destination))):
            best = m
    if best is None:
        return None
    rest = path[len(posixpath.normpath(best.destination)):].lstrip("/")
    return posixpath.join(best.source, rest) if rest else best.source


def _under(path: str, prefix: str) -> bool:
    path, prefix = posixpath.normpath(path), posixpath.normpath(prefix)
    return path == prefix or path.startswith(prefix.rstrip("/") + "/")


def container_changes(old: ContainerSpec, new: ContainerSpec) -> list[FlagChange]:
    out: list[FlagChange] = []

    def change(what: str, a: object, b: object, reason: str | None = None) -> None:
        if a == b:
            return
        kind = "added" if a in (None, "", ()) else "removed" if b in (None, "", ()) else "changed"
        out.append(FlagChange(what, kind, a, b, CONTAINER, reason))

    va, vb = sglang_version_of_image(old.image), sglang_version_of_image(new.image)
    reason = None
    if va != vb:
        reason = (f"SGLang {va or 'unknown'} → {vb or 'unknown'}: flags are checked against the new image's version"
                  if vb else "the new image's SGLang version cannot be told from its tag")
    change("image", old.image, new.image, reason)
    a_m = {m.destination: m for m in old.mounts}
    b_m = {m.destination: m for m in new.mounts}
    for dest in sorted(set(a_m) | set(b_m)):
        ma, mb = a_m.get(dest), b_m.get(dest)
        sa = f"{ma.kind} {ma.source}{' (ro)' if ma.read_only else ''}" if ma else None
        sb = f"{mb.kind} {mb.source}{' (ro)' if mb.read_only else ''}" if mb else None
        change(f"mount {dest}", sa, sb, f"the weights' host directory: {ma.source} → {mb.source}"
               if ma and mb and ma.source != mb.source and _model_mount(dest, new) else None)
    ga, gb = (old.gpus.describe if old.gpus else None), (new.gpus.describe if new.gpus else None)
    change("gpus", ga, gb, _gpus_reason(ga, gb))
    # Unset is Docker's default: 64 MiB of /dev/shm, a private IPC namespace (the daemon's default
    # ipc mode, "private" or "shareable"): a compose service without shm_size against a container
    # with ShmSize 67108864 is no change (it was shown as "64 MiB → default (64 MiB)").
    if (old.shm_size_bytes or DOCKER_DEFAULT_SHM) != (new.shm_size_bytes or DOCKER_DEFAULT_SHM):
        change("shm-size", _gib(old.shm_size_bytes), _gib(new.shm_size_bytes))
    modes = {old.ipc_mode or None, new.ipc_mode or None}
    if not (None in modes and modes <= {None, "private", "shareable"}):
        change("ipc", old.ipc_mode or "default", new.ipc_mode or "default",
               "host IPC gives NCCL the host's shared memory" if new.ipc_mode == "host" else None)
    change("network", old.network_mode, new.network_mode)
    change("ports", ", ".join(old.ports) or None, ", ".join(new.ports) or None)
    change("restart", old.restart_policy or "no", new.restart_policy or "no")
    for path in sorted(set(old.env_files) | set(new.env_files)):
        change(f"env-file {path}", "set" if path in old.env_files else None, "set" if path in new.env_files else None,
               "the variables it set are gone from the new service" if path not in new.env_files else None)
    return out


def _model_mount(dest: str, spec: ContainerSpec) -> bool:
    """The mount `--model-path` reads the weights through."""
    path = next((spec.argv[i + 1] for i, a in enumerate(spec.argv[:-1]) if a == "--model-path"), None)
    return isinstance(path, str) and _under(path, dest)


def _gpus_reason(was: str | None, now: str | None) -> str | None:
    """What a change of the GPUs a container is given means for the server (never a bare change)."""
    if now == "all" and was not in (None, "all"):
        return (f"the new container sees every GPU of the host (the old one {was}): its TP ranks take the first "
                "ones, whatever else runs on them")
    if was == "all" and now is not None and now != "all":
        return f"the new container sees only {now} (the old one every GPU of the host)"
    if was is not None and now is not None and was != now:
        return f"other GPUs: {was} → {now} (a beside start needs them free)"
    return None


def container_lints(spec: ContainerSpec, facts: HostFacts, tp: int | None, model_path: str | None) -> list[Lint]:
    lints: list[Lint] = []
    for m in spec.mounts:
        if m.kind == "bind":
            for prefix in facts.forbidden_prefixes:
                if _under(m.source, prefix):
                    lints.append(Lint("error", f"mount {m.destination}",
                                      f"host path {m.source} is under {prefix}, which the profile forbids"))
    if model_path and model_path.startswith("/"):
        host = _host_path(model_path, spec)
        if host is None:
            mounts = ", ".join(m.destination for m in spec.mounts) or "none"
            lints.append(Lint("error", "--model-path",
                              f"{model_path} is not mounted into the container (mounts: {mounts}): "
                              "the server will not find the weights"))
        else:
            exists = facts.paths_exist.get(host)
            if exists is False:
                lints.append(Lint("error", "--model-path", f"{model_path} is {host} on the host, which does not exist"))
    visible_env = spec.environment.get("CUDA_VISIBLE_DEVICES")
    visible = spec.gpus.visible(facts.gpu_count) if spec.gpus else 0
    if visible_env is not None and visible_env.strip():
        n_env = len([x for x in visible_env.split(",") if x.strip()])
        visible = n_env if visible is None else min(visible, n_env)
    if spec.gpus is None:
        lints.append(Lint("error", "gpus", "no GPUs requested (`--gpus all` or compose "
                                           "`deploy.resources.reservations.devices`)"))
    elif tp is not None and visible is not None and tp > visible:
        seen = f"gpus {spec.gpus.describe}" + (f", CUDA_VISIBLE_DEVICES={visible_env}" if visible_env else "")
        lints.append(Lint("error", "--tp-size", f"TP {tp} needs {tp} GPUs; the container sees {visible} ({seen})"))
    if (tp or 1) > 1 and spec.ipc_mode != "host" and (spec.shm_size_bytes or DOCKER_DEFAULT_SHM) < MIN_TP_SHM:
        lints.append(Lint("warning", "shm-size",
                          f"TP {tp} with {_gib(spec.shm_size_bytes)} of /dev/shm and ipc {spec.ipc_mode or 'default'}: "
                          "NCCL needs shared memory; use --ipc=host or --shm-size 32g as SGLang's docs do"))
    state = spec.state
    if state is not None and (state.restarting or state.restart_count >= 3):
        lints.append(Lint("error", "restart",
                          f"the container is restarting in a loop ({state.restart_count} restarts, last exit code "
                          f"{state.exit_code if state.exit_code is not None else 'unknown'}"
                          f"{', OOM-killed' if state.oom_killed else ''})"))
    return lints


def build_container_report(old: ContainerSpec | None, new: ContainerSpec, facts: HostFacts, *,
                           table: FlagTable | None = None) -> ServiceReport:
    table = table or builtin_table()
    old_side = side_from_container(old, table) if old is not None else None
    new_side = side_from_container(new, table)
    # The command's own path lints would read container paths as host paths: container_lints translates them.
    generic = build_report(old_side, new_side, replace(facts, forbidden_prefixes=(), paths_exist={}), table=table)
    changes = list(generic.changes)
    if old is not None:
        changes.extend(container_changes(old, new))
    tp_value = new_side.command.value("--tp-size") if new_side.command is not None else None
    tp = int(tp_value) if isinstance(tp_value, str) and tp_value.isdigit() else (1 if new_side.command else None)
    model = new_side.command.value("--model-path") if new_side.command is not None else None
    lints = list(generic.lints) + container_lints(new, facts, tp, model if isinstance(model, str) else None)
    version = sglang_version_of_image(new.image)
    if version and version != table.version:
        lints.append(Lint("info", "image", f"the image runs SGLang {version}; flags were checked against "
                                           f"SGLang {table.version}'s table"))
    source = generic.flags_source
    if version and version == table.version:
        # The image's own SGLang (its tag names the version) is the one the flags were read against:
        # the gate's flags check passes, as for a unit whose interpreter was asked (issue 35 item 7).
        source = (f"checked against the host's SGLang {version} (the image {new.image} names it; "
                  f"the flag table of that version)")
    return replace(generic, changes=tuple(changes), lints=tuple(lints), flags_source=source)
