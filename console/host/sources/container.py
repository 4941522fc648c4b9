"""The service source when SGLang runs in a container (issue 26): `docker inspect` of the watched
container and the one it replaces (or a compose file's service), in one round-trip over the one
SSH connection, plus the containers on the host that run SGLang. No Docker API client: the `docker`
CLI on the host, as the operator would run it.

The same `ServiceReport` as for units comes out, so the diff pane, the lints, the gate and the
report read one shape.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import Any

from console.domain.analysis.container_diff import _host_path, build_container_report, side_from_container
from console.domain.analysis.service_diff import HostFacts
from console.domain.analysis.service_report import ServiceReport, ServiceSide, build_report, with_other_way
from console.host.parsers import ParseError, split_sections
from console.host.parsers.docker import (
    COMPOSE_PROJECT,
    COMPOSE_SERVICE,
    ContainerRow,
    ContainerSpec,
    compose_container_name,
    compose_container_on_host,
    parse_compose,
    parse_inspect,
    parse_ps,
    runs_sglang,
)
from console.host.parsers.sglang_log import LogEvent
from console.redact import redact_text
from console.host.sources.log import LogFollower
from console.host.sources.service import ServiceWatcher
from console.host.transport.base import Transport, quote

INSPECT_TIMEOUT_S = 20.0
CONTAINER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")  # Docker's validContainerNamePattern
_CONTROL = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b.|[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def clean(text: str) -> str:
    """One line, with no escape sequence or control character from the host (pane text)."""
    return " ".join(_CONTROL.sub("", text.replace("\n", " ").replace("\t", " ")).split())


# Only the fields the console reads: `{{json .}}` makes the daemon compute every container's size
# (1.4-2.9 s a poll with one large container layer against 0.01-0.11 s; research/real_daemons.md),
# and `--size=false` is CLI 28's only. The same JSON line shape, so parse_ps reads both.
PS_FIELDS = ("ID", "Names", "Image", "Command", "Status", "State", "Labels")
PS_TEMPLATE = "{" + ",".join(f'"{f}":{{{{json .{f}}}}}' for f in PS_FIELDS) + "}"


def container_script(names: list[str]) -> str:
    parts = []
    for i, name in enumerate(names):
        parts.append(f"echo @@inspect{i}; docker inspect --type container -- {quote(name)} 2>&1; "
                     f"__rc=$?; echo @@rc{i}; echo $__rc")
    parts.append(f"echo @@ps; docker ps -a --no-trunc --format {quote(PS_TEMPLATE)} 2>&1")
    return "; ".join(parts) + "; true"


class ContainerWatcher(ServiceWatcher):
    """`new_unit`/`old_unit` name containers here (the picker and `s` work as for units)."""

    def __init__(self, transport: Transport, container: str, compare_container: str | None, *,
                 compose_file: str | None = None, compose_service: str | None = None,
                 forbidden_prefixes: tuple[str, ...] = (), host_root: str | None = None) -> None:
        super().__init__(transport, container, compare_container, forbidden_prefixes=forbidden_prefixes,
                         host_root=host_root)
        self.compose_file = compose_file
        self.compose_service = compose_service
        self.containers_on_host: tuple[str, ...] = ()
        self.rows: list[ContainerRow] = []  # the last `docker ps -a` (a compose service's container is among them)
        # The compose service's container as Compose names it (container_name, or found on the host by
        # its labels, or PROJECT-SERVICE-1 before it is created); None until the file is read.
        self.compose_container: str | None = None
        # The last specs read ("new", "old"): the swap's faster paths map paths through their mounts.
        self.specs: dict[str, ContainerSpec] = {}

    async def read_specs(self, names: list[str]) -> tuple[list[ContainerSpec | str], tuple[str, ...]]:
        """Each container's spec, or the one line that says why there is none."""
        result = await self.transport.run(container_script(names), timeout=INSPECT_TIMEOUT_S)
        s = split_sections(result.text)
        specs: list[ContainerSpec | str] = []
        for i, name in enumerate(names):
            text = s.get(f"inspect{i}", "")
            if s.get(f"rc{i}", "").strip() != "0":
                why = " ".join(ln for ln in text.splitlines() if ln.strip() and ln.strip() not in ("[]", "[", "]"))
                specs.append(clean(redact_text(f"{name}: {why.strip() or 'docker inspect failed'}")))
                continue
            try:
                found = parse_inspect(text)
            except ParseError as exc:
                specs.append(clean(f"{name}: {exc}"))
                continue
            specs.append(found[0] if found else f"{name}: no such container")
        self.rows = parse_ps(s.get("ps", ""))
        names_on_host = tuple(sorted(r.name for r in self.rows if runs_sglang(r.command)))
        return specs, names_on_host

    async def _compose_spec(self) -> ContainerSpec | str:
        assert self.compose_file is not None
        try:
            raw = await self.transport.read_file(self.compose_file, max_bytes=1 << 20, timeout=10)
        except Exception as exc:  # noqa: BLE001 - one line in the pane
            return f"{self.compose_file}: cannot read it ({clean(str(exc)) or type(exc).__name__})"
        try:
            spec = parse_compose(raw.decode("utf-8", "replace"), self.compose_service, path=self.compose_file)
        except ParseError as exc:
            return clean(f"{self.compose_file}: {exc}")
        labels = dict(spec.labels)
        project, service = labels.get(COMPOSE_PROJECT), labels[COMPOSE_SERVICE]
        # `container_name:` names the container itself (Compose uses it): no label on the host overrides it.
        named = spec.name not in (service, compose_container_name(project, service) if project else service)
        on_host = None if named else compose_container_on_host(self.rows, project, service, self.compose_file)
        if on_host and CONTAINER_NAME.match(on_host):  # a hostile name from the host is not taken
            spec = replace(spec, name=on_host)
        self.compose_container = spec.name if CONTAINER_NAME.match(spec.name) else None
        return spec

    async def _container_facts(self, spec: ContainerSpec, gpus: int | None) -> HostFacts:
        side = side_from_container(spec, self.table)
        model = side.command.value("--model-path") if side.command is not None else None
        host_paths = [m.source for m in spec.mounts if m.kind == "bind" and m.source.startswith("/")]
        exists: dict[str, bool] = {}
        model_host = _host_path(model, spec) if isinstance(model, str) and model.startswith("/") else None
        check = sorted(set(host_paths + ([model_host] if model_host else [])))
        if check:
            script = "; ".join(f"if [ -e {quote(p)} ]; then echo 1; else echo 0; fi" for p in check)
            r = await self.transport.run(script, timeout=10)
            exists = {p: a == "1" for p, a in zip(check, r.text.split(), strict=False)}
        config: dict[str, Any] | None = None
        if model_host and exists.get(model_host):
            try:
                raw = await self.transport.read_file(model_host.rstrip("/") + "/config.json", max_bytes=4 << 20,
                                                     timeout=10)
                loaded = json.loads(raw)
                config = loaded if isinstance(loaded, dict) else None
            except Exception:  # noqa: BLE001 - no config.json yet: lints that need it wait
                config = None
        return HostFacts(model_config=config, paths_exist=exists, forbidden_prefixes=self.forbidden_prefixes,
                         host_root=self.host_root,
                         gpu_count=gpus)

    async def poll(self) -> ServiceReport:
        names = [n for n in (self.new_unit, self.old_unit) if n]
        if self.compose_file is not None:
            names = [n for n in (self.old_unit,) if n]
        specs, on_host = await self.read_specs(names)
        self.containers_on_host = on_host
        new: ContainerSpec | str = await self._compose_spec() if self.compose_file is not None else specs[0]
        old = None
        if self.old_unit:
            old = specs[0] if self.compose_file is not None else specs[1] if len(specs) > 1 else None
        self.specs = {k: v for k, v in (("new", new), ("old", old)) if isinstance(v, ContainerSpec)}
        gpus = await self.gpu_count()
        report = await self._compare(new, old, self.new_unit, self.old_unit, on_host, gpus)
        if old is None:
            return report
        # And the other way round, from the same read: what `s` in the diff pane shows (issue 20).
        return with_other_way(report, await self._compare(old, new, self.old_unit, self.new_unit, on_host, gpus))

    async def _compare(self, new: ContainerSpec | str, old: ContainerSpec | str | None, new_name: str | None,
                       old_name: str | None, on_host: tuple[str, ...], gpus: int | None) -> ServiceReport:
        if isinstance(new, str) or isinstance(old, str):
            def side(x: ContainerSpec | str | None, name: str | None) -> ServiceSide | None:
                if x is None:
                    return None
                if isinstance(x, str):
                    return ServiceSide(name or "?", None, None, None, error=x)
                return side_from_container(x, self.table)
            new_side = side(new, new_name)
            assert new_side is not None
            facts = HostFacts(forbidden_prefixes=self.forbidden_prefixes, host_root=self.host_root, gpu_count=gpus)
            return build_report(side(old, old_name), new_side, facts,
                                table=self.table, units_on_host=on_host,
                                flags_source=f"built-in flag table of SGLang {self.table.version}")
        facts = await self._container_facts(new, gpus)
        report = build_container_report(old, new, facts, table=self.table)
        return replace(report, units_on_host=on_host)


class ComposeLogFollower(LogFollower):
    """A compose-only profile's log (issue 26): `docker logs --follow` of the container Compose
    made for the service, named by the service reading (its `container_name`, the container found
    by Compose's labels, or PROJECT-SERVICE-1), else of the old container while the new one is not
    running. Until the compose file is read, the stream waits (one line, then the backoff)."""

    def __init__(self, transport: Transport, watcher: ContainerWatcher, *, compare_container: str | None = None,
                 backlog: int | None = None) -> None:
        super().__init__(transport, container=watcher.compose_service or "compose",
                         compare_container=compare_container,
                         **({"backlog": backlog} if backlog is not None else {}))  # type: ignore[arg-type]
        self.watcher = watcher
        self.label = f"docker logs of compose service {watcher.compose_service or '?'} ({watcher.compose_file})" + (
            f" and {compare_container}" if compare_container else "")
        self.tracker.source = self.label
        self._resolved: str | None = None

    async def read_backlog(self) -> tuple[LogEvent, ...]:
        """`snapshot --json`: the backlog of the service's container (read the compose file first
        when it was not yet), never `docker logs` of the service's name."""
        if self.watcher.compose_container is None:
            await self.watcher.poll()
        self._resolve()
        return await super().read_backlog()

    def _resolve(self) -> None:
        name = self.watcher.compose_container
        if name is None:
            raise RuntimeError(f"waiting for {self.watcher.compose_file} to be read: the container of "
                               f"{self.watcher.compose_service or 'its SGLang service'} is not named yet")
        if name != self._resolved:
            if self._resolved is not None:
                self.since = None  # another container: its own backlog, not the last one's time
            self._resolved = self.container = name

    async def _command(self) -> tuple[str, str | None]:
        self._resolve()
        return await super()._command()

    def _followed(self) -> tuple[str, ...]:
        self._resolve()
        return super()._followed()
