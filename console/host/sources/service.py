"""The service source: both units (`systemctl cat`), their state and the running process's argv in
one round-trip; then the new unit's paths and the model's config.json; and the host's own SGLang
flags (`python -m sglang.launch_server --help`), read once per SGLang version."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import replace
from typing import Any

from console.domain.analysis.service_diff import PATH_FLAGS, REDACTED, HostFacts, redact_env
from console.domain.analysis.service_report import (
    ServiceReport,
    ServiceSide,
    UnitBackup,
    build_report,
    side_from_text,
    with_other_way,
)
from console.domain.paths import exists_and_real_script, parse_exists_and_real
from console.host.parsers import split_sections
from console.host.parsers.sglang_argv import NotSglang, normalize
from console.host.parsers.sglang_flags import FlagTable, builtin_table, table_from_help
from console.host.parsers.systemd import ignored_directives, parse_env_file
from console.host.sources.base import PolledSource, describe_error
from console.host.transport.base import Transport, operand, quote
from console.redact import redact_argv, redact_text
from console.sanitize import clean_block, clean_line

GPU_COUNT_TIMEOUT_S = 8.0
ENV_FILES_MAX = 8  # EnvironmentFile= entries read per unit
ENV_FILE_MAX_BYTES = 256 << 10
_VERSION = re.compile(r"^\d+\.\d+[\w.+-]*$")
_STAMP = re.compile(r"(\d{8}T\d{6}Z)")
PID1_LINES = 200  # PID 1's last lines about a unit read per poll (a reload's warnings among them)
UNIT_BACKUP_MAX_BYTES = 256 << 10  # a unit file is a few KiB: more is not a unit the install kept


def service_script(units: list[str], backup_of: str | None = None) -> str:
    """Both units' text, state and running argv; with `backup_of` (in place on one unit), that unit's
    file (`F path`) and the backups an install kept beside it (`B path`, its `.bak-*` files)."""
    parts = []
    for i, unit in enumerate(units):
        q = quote(unit)
        parts.append(f"echo @@cat{i}; systemctl cat --no-pager -- {q} 2>&1; "
                     f"__rc=$?; echo @@catrc{i}; echo $__rc")
        parts.append(f"echo @@show{i}; systemctl show --no-pager -p ActiveState,SubState,MainPID -- {q} 2>/dev/null")
        # PID 1's words about the unit's files (a key it does not know, and ignores): its last lines,
        # only those (no other line of the journal reaches the sections)
        parts.append(f"echo @@ignored{i}; journalctl _PID=1 {quote('UNIT=' + unit)} -o cat -n {PID1_LINES} "
                     "--no-pager -q 2>/dev/null | grep -F -e ': Unknown key' -e ': Unknown lvalue' "
                     "-e ': Unknown section'")
        parts.append(f"echo @@cmdline{i}; __p=$(systemctl show -p MainPID --value -- {q} 2>/dev/null); "
                     f"if [ \"${{__p:-0}}\" -gt 0 ] 2>/dev/null; then tr '\\0' '\\n' < /proc/$__p/cmdline; fi")
    parts.append("echo @@units; systemctl list-unit-files --no-legend --no-pager 'sglang*' 2>/dev/null")
    if backup_of is not None:
        parts.append("echo @@backups; "
                     f"__f=$(systemctl show -p FragmentPath --value -- {quote(backup_of)} 2>/dev/null); "
                     "if [ -n \"$__f\" ]; then printf 'F %s\\n' \"$__f\"; "
                     "for __c in \"$__f\".bak-*; do [ -f \"$__c\" ] && printf 'B %s\\n' \"$__c\"; done; fi")
    return "; ".join(parts) + "; true"


def newest_backup(listing: str) -> tuple[str, str] | None:
    """(path, stamp) of the newest backup in the `@@backups` section: only `UNIT.bak-STAMP` beside the
    unit's own file, with the install's stamp (console/domain/swap/unit_steps.py's %Y%m%dT%H%M%SZ);
    anything else there is not an install's backup."""
    lines = listing.splitlines()
    fragment = next((line[2:] for line in lines if line.startswith("F /")), None)
    if fragment is None:
        return None
    found = [(m.group(1), line[2:]) for line in lines if line.startswith("B ")
             and line[2:].startswith(fragment + ".bak-") and (m := _STAMP.fullmatch(line[2 + len(fragment) + 5:]))]
    if not found:
        return None
    stamp, path = max(found)
    return path, stamp


def _props(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


class ServiceWatcher:
    def __init__(self, transport: Transport, new_unit: str, old_unit: str | None, *,
                 forbidden_prefixes: tuple[str, ...] = (), host_root: str | None = None) -> None:
        self.transport = transport
        self.new_unit = new_unit
        self.old_unit = old_unit
        self.forbidden_prefixes = forbidden_prefixes
        self.host_root = host_root  # the lints name a path as the host names it (HostProfile.host_root)
        self.table: FlagTable = builtin_table()
        self._tables: dict[str, FlagTable] = {}
        self.flags_note: str | None = None
        self.flags_binary: str | None = None  # the interpreter run for the current report, if any
        self._probes: dict[tuple[str, str], tuple[FlagTable, str | None, str | None]] = {}
        self.unit_backup: UnitBackup | None = None  # in place on one unit: the last poll's read of it
        self._backup: UnitBackup | None = None  # the last backup read (a backup's file never changes)

    def swap(self) -> None:
        """Watch the old unit as the new one (a tool's setup, like `pick`). No view calls it: `s` in
        the diff pane shows the report's other way (`ServiceReport.flipped`) and asks nothing."""
        if self.old_unit:
            self.new_unit, self.old_unit = self.old_unit, self.new_unit

    def pick(self, new_unit: str, old_unit: str | None) -> None:
        self.new_unit, self.old_unit = new_unit, old_unit

    async def _host_table(self, python: str, unit_text: str) -> FlagTable:
        """The flags of the SGLang installed for an installed unit's interpreter.

        Importing sglang costs the host seconds of CPU, so the interpreter runs once per change
        of the unit (its text and the interpreter path are the key), never per poll.
        """
        key = (python, hashlib.sha256(unit_text.encode()).hexdigest())
        cached = self._probes.get(key)
        if cached is not None:
            self.flags_note, self.flags_binary = cached[1], cached[2]
            return cached[0]
        table = await self._probe_host_table(python)
        self._probes[key] = (table, self.flags_note, self.flags_binary)
        while len(self._probes) > 8:
            self._probes.pop(next(iter(self._probes)))
        return table

    async def _probe_host_table(self, python: str) -> FlagTable:
        self.flags_binary = python
        exe = operand(python)
        try:
            r = await self.transport.run(f"{exe} -c 'import sglang; print(sglang.__version__)'", timeout=20)
        except Exception as exc:  # noqa: BLE001 - the built-in table is a fine answer
            self.flags_note = (f"host SGLang version unknown ({describe_error(exc)}): "
                               f"built-in table of {builtin_table().version}")
            return builtin_table()
        version = r.text.strip().splitlines()[-1] if r.ok and r.text.strip() else ""
        if not _VERSION.match(version):
            self.flags_note = f"no sglang for {python} on the host: built-in table of {builtin_table().version}"
            return builtin_table()
        if version in self._tables:
            table = self._tables[version]
        elif version == builtin_table().version:
            table = builtin_table()
        else:
            try:
                h = await self.transport.run(f"{exe} -m sglang.launch_server --help", timeout=60)
                table = table_from_help(h.text, version) if h.ok and "--model-path" in h.text else builtin_table()
            except Exception as exc:  # noqa: BLE001
                self.flags_note = f"SGLang {version}'s --help failed ({describe_error(exc)}): built-in table"
                return builtin_table()
        self._tables[version] = table
        self.flags_note = f"checked against the host's SGLang {version}"
        return table

    async def gpu_count(self) -> int | None:
        """`nvidia-smi -L` on its own round-trip with a short timeout: a hung driver never takes the diff."""
        try:
            r = await self.transport.run("nvidia-smi -L 2>/dev/null | grep -c '^GPU'", timeout=GPU_COUNT_TIMEOUT_S)
        except Exception:  # noqa: BLE001 - unknown is an answer: the lints that need it say so
            return None
        gpus = r.text.strip()
        return int(gpus) if gpus.isdigit() and 0 < int(gpus) < 1024 else None

    async def read_sides(self, units: list[str]) -> tuple[list[ServiceSide], tuple[str, ...], int | None]:
        """The units as the host has them, with state and running argv; the sglang units found; GPU count."""
        one = units[0] if len(units) == 2 and units[0] == units[1] else None  # in place on one unit
        result = await self.transport.run(service_script(units, one), timeout=20)
        # Unit texts are cleaned by side_from_text (after its check for binary content); the rest
        # here: no escape sequence from the host goes further (issue 21, item 1).
        s = {k: v if k.startswith("cat") else clean_block(v) for k, v in split_sections(result.text).items()}
        sides: list[ServiceSide] = []
        for i, unit in enumerate(units):
            text = s.get(f"cat{i}", "")
            if s.get(f"catrc{i}", "0").strip() != "0":
                # `systemctl cat` of a unit with no file: "No files found for NAME." (exit 1)
                why = "not installed yet" if "No files found" in text or not text.strip() else text.strip()
                sides.append(ServiceSide(unit, None, None, None, error=redact_text(clean_line(f"{unit}: {why}"))))
                continue
            side = side_from_text(unit, text, self.table)
            ignored = ignored_directives(s.get(f"ignored{i}", ""), text)
            if side.unit is not None and ignored:
                side = replace(side, unit=replace(side.unit, problems=side.unit.problems + ignored))
            props = _props(s.get(f"show{i}", ""))
            cmdline = list(redact_argv(s.get(f"cmdline{i}", "").splitlines()))
            running = None
            if cmdline:
                try:
                    running = normalize(cmdline, self.table)
                except NotSglang:
                    running = None
            pid = props.get("MainPID", "0")
            sides.append(replace(side, active_state=props.get("ActiveState"), sub_state=props.get("SubState"),
                                 main_pid=int(pid) if pid.isdigit() and int(pid) > 0 else None, running=running,
                                 env_files_read=await self._env_files(side)))
        units_on_host = tuple(line.split()[0] for line in s.get("units", "").splitlines() if line.strip())
        self.unit_backup = await self._read_backup(s.get("backups", "")) if one is not None else None
        return sides, units_on_host, await self.gpu_count()

    async def _read_backup(self, listing: str) -> UnitBackup:
        """The newest backup an install kept of the unit, read once (a bounded read of its file)."""
        newest = newest_backup(listing)
        if newest is None:
            return UnitBackup(None)
        path, stamp = newest
        if self._backup is not None and self._backup.path == path and self._backup.text is not None:
            return self._backup
        try:
            raw = await self.transport.read_file(path, max_bytes=UNIT_BACKUP_MAX_BYTES + 1, timeout=10)
        except Exception:  # noqa: BLE001 - no permission, a dropped connection: there, but unread
            return UnitBackup(path, stamp)
        text = raw[:UNIT_BACKUP_MAX_BYTES].decode("utf-8", "replace")
        # Cleaned and redacted here, at the source: the reading is recorded and shared; what redaction
        # hid is kept only as the unit side's keyed digests are (side_from_text), to be compared with them.
        binary = "\x00" in text
        self._backup = UnitBackup(path, stamp, None if binary else redact_text(clean_block(text)),
                                  truncated=len(raw) > UNIT_BACKUP_MAX_BYTES,
                                  secret_fingerprints={} if binary else side_from_text(path, text).secret_fingerprints)
        return self._backup

    async def _env_files(self, side: ServiceSide) -> dict[str, dict[str, str] | None]:
        """The unit's EnvironmentFile= files as the server will read them (secrets redacted at once):
        a lost env file is the diff's blind spot. A file that cannot be read is left out (unknown)."""
        out: dict[str, dict[str, str] | None] = {}
        for path, _optional in (side.unit.environment_files if side.unit is not None else ())[:ENV_FILES_MAX]:
            if not path.startswith("/"):
                continue
            try:
                raw = await self.transport.read_file(path, max_bytes=ENV_FILE_MAX_BYTES, timeout=10)
            except FileNotFoundError:
                out[path] = None
                continue
            except Exception:  # noqa: BLE001 - no permission, a dropped connection: unknown, not absent
                continue
            variables = parse_env_file(redact_text(raw.decode("utf-8", "replace")))
            out[path] = {k: v if redact_env(k, v) == v else REDACTED for k, v in variables.items()}
        return out

    async def facts_for(self, new: ServiceSide, gpu_count: int | None = None, *,
                        installed: bool = True) -> tuple[ServiceSide, HostFacts]:
        """The host's facts for the new service; re-reads it against the host's own SGLang flags.

        Only a unit installed on the host (`installed`) has its interpreter run there: systemd
        would run it anyway. A local file's interpreter is never run (`diff HOSTUNIT LOCALFILE`).
        """
        self.flags_binary = None
        if (installed and new.text is not None and new.command is not None and new.command.launcher
                and "python" in new.command.launcher[0].rsplit("/", 1)[-1]):
            table = await self._host_table(new.command.launcher[0], new.text)
            if table is not self.table:
                self.table = table
                if new.text:
                    new = replace(side_from_text(new.name, new.text, table), active_state=new.active_state,
                                  sub_state=new.sub_state, main_pid=new.main_pid, running=new.running)
        facts = await self._facts(new)
        return new, replace(facts, gpu_count=gpu_count)

    async def poll(self) -> ServiceReport:
        """Both units in one read, compared both ways: the report, and the other way round (the old
        unit as the new, with its own paths, model config and SGLang flags) that `s` in the diff pane
        shows. Which side a view shows as old is the view's choice: it never asks the host (issue 20)."""
        units = [self.new_unit] + ([self.old_unit] if self.old_unit else [])
        sides, units_on_host, gpus = await self.read_sides(units)
        new, facts = await self.facts_for(sides[0], gpus)
        old = sides[1] if len(sides) > 1 else None
        table, note, binary = self.table, self.flags_note, self.flags_binary
        report = build_report(old, new, facts, table=table, units_on_host=units_on_host,
                              flags_source=note, flags_binary=binary)
        if self.unit_backup is not None:
            report = replace(report, unit_backup=self.unit_backup)
        if old is None:
            return report
        try:
            other, other_facts = await self.facts_for(old, gpus)
            back = build_report(new, other, other_facts, table=self.table, units_on_host=units_on_host,
                                flags_source=self.flags_note, flags_binary=self.flags_binary)
        finally:  # the new unit's table stays the watcher's: the next read parses with it
            self.table, self.flags_note, self.flags_binary = table, note, binary
        return with_other_way(report, back)

    async def _facts(self, new: ServiceSide) -> HostFacts:
        if new.command is None:
            return HostFacts(forbidden_prefixes=self.forbidden_prefixes, host_root=self.host_root)
        paths = [v for f in PATH_FLAGS if isinstance(v := new.command.value(f), str) and v.startswith("/")]
        if new.unit is not None:  # the unit's own files: a required EnvironmentFile= that is missing stops the start
            paths += [p for p, _ in new.unit.environment_files if p.startswith("/") and p not in paths]
        exists: dict[str, bool] = {}
        real: dict[str, str] = {}
        if paths:
            r = await self.transport.run(exists_and_real_script(paths), timeout=10)
            exists, real = parse_exists_and_real(paths, clean_block(r.text))
        config: dict[str, Any] | None = None
        model = new.command.value("--model-path")
        if isinstance(model, str) and exists.get(model):
            try:
                raw = await self.transport.read_file(model.rstrip("/") + "/config.json", max_bytes=4 << 20, timeout=10)
                loaded = json.loads(raw)
                config = loaded if isinstance(loaded, dict) else None
            except Exception:  # noqa: BLE001 - no config.json yet (download running): lints that need it wait
                config = None
        return HostFacts(model_config=config, paths_exist=exists, forbidden_prefixes=self.forbidden_prefixes,
                         host_root=self.host_root,
                         real_paths=real)


def service_source(watcher: ServiceWatcher, interval_s: float = 15.0) -> PolledSource[ServiceReport]:
    return PolledSource("service", watcher.poll, interval_s, max_backoff_s=60.0)
