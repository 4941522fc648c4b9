"""The SGLang-aware diff of two services, the reasons behind each change, and the lints that
catch the seeds' blind spots. Pure: everything the host knows arrives in `HostFacts`."""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field, replace
from typing import Any

from console.domain.paths import forbidden_prefix
from console.host.parsers.sglang_argv import SglangCommand
from console.host.parsers.sglang_flags import FlagTable, builtin_table
from console.host.parsers.systemd import LIST_DIRECTIVES, Unit
from console.units import counted

CATEGORIES = {
    "model": "model identity", "dtype_quantization": "dtype/quantization",
    "kernel_backend": "kernel backends", "cuda_graph_compile": "kernel backends", "overlap": "kernel backends",
    "parallelism": "parallelism", "communication": "parallelism", "disaggregation": "parallelism",
    "moe_expert": "parallelism", "memory_scheduling": "memory", "mamba_hybrid": "memory",
    "prefix_cache_hicache": "memory", "offload": "memory", "speculative": "speculative decoding",
    "serving_features": "API features", "multimodal": "API features", "lora": "API features",
    "observability_logging": "observability",
}
CATEGORY_ORDER = ("model identity", "dtype/quantization", "kernel backends", "parallelism", "memory",
                  "speculative decoding", "API features", "observability", "container", "other")
SECRET_NAME = re.compile(r"(TOKEN|API_KEY|APIKEY|SECRET|PASSWORD|PASSWD|PASSPHRASE|CREDENTIAL|PRIVATE_KEY)", re.I)
SECRET_FLAG = re.compile(r"(api-key|token|secret|password)$", re.I)  # --api-key, --hf-token; not --max-total-tokens
REDACTED = "‹redacted›"
FP4_METHODS = {"modelopt_fp4", "nvfp4_online", "petit_nvfp4", "mxfp4", "quark_mxfp4", "w4afp8"}
FP4_MOE_RUNNERS = {"flashinfer_cutlass", "flashinfer_trtllm", "flashinfer_cutedsl", "flashinfer_mxfp4"}
PATH_FLAGS = ("--model-path", "--tokenizer-path", "--download-dir", "--speculative-draft-model-path")
DEPRECATION_HINTS = {
    "--disable-cuda-graph": "--cuda-graph-backend-decode disabled / --cuda-graph-backend-prefill disabled",
    "--enable-dp-attention": "--attn-dp-size N",
    "--grpc-mode": "--smg-grpc-mode",
    "--enable-flashinfer-allreduce-fusion": "--flashinfer-allreduce-fusion-backend auto",
    "--disable-fast-image-processor": "--image-processor-backend pil",
    "--cuda-graph-max-bs": "--cuda-graph-max-bs-decode (and --cuda-graph-max-bs-prefill)",
    "--cuda-graph-bs": "--cuda-graph-bs-decode / --cuda-graph-bs-prefill",
    "--mamba-scheduler-strategy": "--mamba-radix-cache-strategy",
}


@dataclass(frozen=True, slots=True)
class FlagChange:
    flag: str
    change: str  # "added", "removed" or "changed"
    old: Any
    new: Any
    category: str
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class EnvChange:
    name: str
    change: str
    old: str | None
    new: str | None


@dataclass(frozen=True, slots=True)
class UnitChange:
    """A unit directive other than the command line and Environment=: how systemd runs the server."""

    directive: str  # "EnvironmentFile", "User", "LimitNOFILE", "drop-in", ...
    change: str  # "added", "removed" or "changed"
    old: str | None
    new: str | None
    section: str = "Service"
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class Lint:
    severity: str  # "error", "warning" or "info"
    flag: str | None
    message: str


@dataclass(frozen=True, slots=True)
class HostFacts:
    """What the host told us, for the lints. Unknown is None: a lint that needs it is skipped."""

    model_config: dict[str, Any] | None = None
    paths_exist: dict[str, bool] = field(default_factory=dict)
    forbidden_prefixes: tuple[str, ...] = ()
    gpu_count: int | None = None
    real_paths: dict[str, str] = field(default_factory=dict)  # `realpath -m` on the host (issue 21, item 14)
    # The demo's sandbox (HostProfile.host_root): a lint names a path as the host names it. None: a real host.
    host_root: str | None = None


def redact_value(flag: str, value: Any) -> Any:
    if SECRET_FLAG.search(flag) and value not in (None, True, False):
        return REDACTED
    return value


def redact_env(name: str, value: str | None) -> str | None:
    if value is None or not SECRET_NAME.search(name):
        return value
    return REDACTED


def redacted_argv(cmd: SglangCommand, table: FlagTable | None = None) -> list[str]:
    """The command line with secret values replaced, for panes, JSON and screenshots."""
    table = table or builtin_table()
    out: list[str] = list(cmd.launcher)
    hide_next = False
    for word in cmd.argv:
        if hide_next:
            out.append(REDACTED)
            hide_next = False
            continue
        option, eq, _ = word.partition("=")
        if word.startswith("--"):
            spec = table.lookup(option).spec
            name = spec.flag if spec else option
            if SECRET_FLAG.search(name):
                if eq:
                    out.append(f"{option}={REDACTED}")
                else:
                    out.append(word)
                    hide_next = True
                continue
        out.append(word)
    return out


def category_of(flag: str, table: FlagTable) -> str:
    spec = table.specs.get(flag)
    return CATEGORIES.get(spec.category, "other") if spec else "other"


def _text_config(config: dict[str, Any] | None) -> dict[str, Any]:
    if not config:
        return {}
    tc = config.get("text_config")
    return {**config, **tc} if isinstance(tc, dict) else config


def checkpoint_dtype(config: dict[str, Any] | None) -> str | None:
    tc = _text_config(config)
    value = tc.get("dtype") or tc.get("torch_dtype")
    return str(value) if value else None


def checkpoint_quant(config: dict[str, Any] | None) -> str | None:
    for c in (config or {}, _text_config(config)):
        q = c.get("quantization_config")
        if isinstance(q, dict):
            return str(q.get("quant_method") or q.get("quant_algo") or "quantized")
    return None


def mtp_layers(config: dict[str, Any] | None) -> int | None:
    tc = _text_config(config)
    for key in ("mtp_num_hidden_layers", "num_nextn_predict_layers"):
        if isinstance(tc.get(key), int):
            return int(tc[key])
    return None if not tc else 0


def _show(value: Any) -> str:
    if value is True:
        return "on"
    if isinstance(value, tuple):
        return " ".join(value)
    return str(value)


def diff_commands(old: SglangCommand, new: SglangCommand, *, new_config: dict[str, Any] | None = None,
                  table: FlagTable | None = None) -> list[FlagChange]:
    table = table or builtin_table()
    changes: list[FlagChange] = []
    for flag in sorted(set(old.flags) | set(new.flags)):
        a, b = old.flags.get(flag), new.flags.get(flag)
        va = redact_value(flag, a.value if a else None)
        vb = redact_value(flag, b.value if b else None)
        if a and b:
            if a.value == b.value:
                continue
            kind = "changed"
        else:
            kind = "added" if b else "removed"
        changes.append(FlagChange(flag, kind, va, vb, category_of(flag, table)))
    return _with_reasons(changes, old, new, new_config, table)


def _with_reasons(changes: list[FlagChange], old: SglangCommand, new: SglangCommand,
                  new_config: dict[str, Any] | None, table: FlagTable) -> list[FlagChange]:
    old_quant = old.value("--quantization")
    new_quant = new.value("--quantization")
    quant_dropped = bool(old_quant) and not new_quant
    dtype = checkpoint_dtype(new_config)
    ckpt_quant = checkpoint_quant(new_config)
    spec_added = [c for c in changes if c.change == "added" and c.category == "speculative decoding"]
    out: list[FlagChange] = []
    for c in changes:
        spec = table.specs.get(c.flag)
        reason: str | None = None
        if c.flag == "--quantization" and c.change == "removed":
            if new_config is not None and ckpt_quant is None:
                native = (dtype or "unquantized").upper().replace("BFLOAT16", "BF16")
                reason = f"native {native} checkpoint: no quantization_config"
            elif ckpt_quant:
                reason = f"SGLang reads {ckpt_quant} from the checkpoint's quantization_config"
            else:
                reason = "quantization is detected from the checkpoint"
        elif c.flag == "--quantization" and c.change == "changed":
            reason = f"quantization {c.old} → {c.new}"
        elif c.change == "removed" and quant_dropped and spec and spec.quantization_specific:
            reason = f"{old_quant}-specific ({spec.quantization_specific}): goes with the quantization"
        elif c.change == "removed" and quant_dropped and c.flag == "--moe-runner-backend":
            fp4 = str(old_quant) in FP4_METHODS and str(c.old) in FP4_MOE_RUNNERS
            reason = (f"{c.old} was the FP4 MoE runner for {old_quant}" if fp4 else
                      f"MoE runner chosen for {old_quant}") + "; BF16 experts use the auto default"
        elif c.change == "removed" and quant_dropped and c.category == "kernel backends":
            reason = f"kernel backend chosen for {old_quant}; the auto default applies now"
        elif c.category == "speculative decoding" and c.change == "added" and len(spec_added) > 1:
            algo = new.value("--speculative-algorithm")
            parts = [f"{algo}" if algo else "speculative decoding"]
            for flag, label in (("--speculative-num-steps", "steps"), ("--speculative-eagle-topk", "topk"),
                                ("--speculative-num-draft-tokens", "draft tokens")):
                if new.value(flag) is not None:
                    parts.append(f"{new.value(flag)} {label}")
            mtp = mtp_layers(new_config)
            tail = f"; the checkpoint has {counted(mtp, 'MTP layer')}" if mtp else ""
            reason = f"speculative decoding added together: {', '.join(parts)}{tail}"
        elif c.flag == "--model-path" and c.change == "changed":
            before, after = (posixpath.basename(str(v).rstrip("/")) for v in (c.old, c.new))
            reason = f"new model: {before} → {after}"
        elif c.flag == "--served-model-name":
            reason = f"clients must now ask for model {c.new!r}" if c.new else "clients ask for the model path"
        elif c.flag in ("--tp-size", "--dp-size", "--ep-size", "--pp-size"):
            reason = f"{c.flag[2:4].upper()} {c.old or 1} → {c.new or 1}"
        elif c.flag == "--mem-fraction-static":
            reason = "memory SGLang may hold for weights + KV cache" + ("" if c.new else "; now auto-derived")
        out.append(replace(c, reason=reason))
    return out


def diff_env(old: dict[str, str], new: dict[str, str]) -> list[EnvChange]:
    out = []
    for name in sorted(set(old) | set(new)):
        a, b = old.get(name), new.get(name)
        if a == b:
            continue
        kind = "changed" if a is not None and b is not None else "added" if b is not None else "removed"
        out.append(EnvChange(name, kind, redact_env(name, a), redact_env(name, b)))
    return out


# Compared elsewhere (the flags, the environment) or not about how the server runs.
_NOT_UNIT_CHANGES = {("Service", "ExecStart"), ("Service", "Environment"), ("Unit", "Description")}
_LIMIT_WHY = {
    "LimitNOFILE": "open files: the HTTP server and the tokenizer hold one per connection; too few fails "
                   "under load with 'Too many open files'",
    "LimitMEMLOCK": "locked memory: NCCL and pinned host buffers need it; too little fails at start or at "
                    "the first all-reduce",
    "LimitNPROC": "processes and threads: SGLang starts one scheduler per GPU plus detokenizer and workers",
    "LimitCORE": "core dumps of a crashed server (a 100 GB process writes a 100 GB core)",
    "LimitSTACK": "thread stack size",
}


def _under(path: str, prefixes: tuple[str, ...]) -> str | None:
    for prefix in prefixes:
        root = prefix.rstrip("/")
        if path == root or path.startswith(root + "/"):
            return prefix
    return None


def _names(variables: dict[str, str]) -> str:
    names = sorted(variables)
    return ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")


def _env_file_reason(change: str, path: str, optional: bool, facts: HostFacts,
                     read: dict[str, dict[str, str] | None] | None = None) -> str:
    exists = facts.paths_exist.get(path)
    content = (read or {}).get(path, ...)
    if change == "removed":
        if isinstance(content, dict) and content:
            return (f"the old server read {_names(content)} from {path}; the new unit does not read it: "
                    "the new server starts without them")
        if content is None:
            return f"the old unit's {path} is not on the host: dropping it changes nothing that ran"
        why = (f"the old server read variables from {path}; the new unit does not: whatever it set (tokens, "
               "CUDA/NCCL settings, SGLANG_* options) is missing when the new server starts")
        if exists is True:
            why += " (the file is on the host)"
        elif optional:
            why += " (it was optional '-': it may not have existed)"
        return why
    if isinstance(content, dict):
        return f"the server reads {_names(content) or 'nothing'} from {path} when it starts"
    if content is None:
        exists = False
    why = f"variables from {path} apply when the server starts"
    if exists is False:
        why += ("; the file is missing on the host: ignored ('-')" if optional else
                "; the file is missing on the host: systemd refuses to start the unit")
    elif optional:
        why += " (optional '-': a missing file is ignored silently)"
    return why


def _unit_reason(section: str, key: str, change: str, old: str | None, new: str | None,
                 facts: HostFacts) -> str | None:
    value = new if new is not None else old
    if key == "User":
        return (f"the server runs as {new or 'root'}: another home (its Hugging Face cache), other permissions "
                "on the model, log and cache paths")
    if key == "Group":
        return f"the server's group is {new or 'the user’s'}: file and device permissions change"
    if key == "WorkingDirectory":
        where = _under(str(new or ""), facts.forbidden_prefixes) if new else None
        base = "relative paths in the command and the environment resolve from here"
        return base + (f"; {new} is under {where}, which this host's profile forbids" if where else "")
    if key == "Restart":
        if new in (None, "no"):
            return "systemd no longer restarts the server after a crash: it stays down"
        return f"restart policy {old or 'no'} → {new}"
    if key == "RestartSec":
        return "the wait before systemd restarts a crashed server"
    if key.startswith("Limit"):
        return _LIMIT_WHY.get(key, "a resource limit of the server's processes") + (
            "; back to systemd's default" if change == "removed" else "")
    if key in ("ExecStartPre", "ExecStartPost", "ExecCondition"):
        if change == "removed":
            return "no longer runs around each start: whatever it prepared (directories, clocks, caches) is not done"
        strict = not str(value).lstrip("@+!:").startswith("-")
        return "runs at each start" + ("; if it fails, the server does not start" if strict and key != "ExecStartPost"
                                       else "")
    if key in ("ExecStop", "ExecStopPost", "KillMode", "KillSignal", "TimeoutStopSec", "SendSIGKILL"):
        return "how the server is stopped: its GPU memory frees only when every scheduler process has exited"
    if key in ("TimeoutStartSec", "TimeoutSec"):
        return "loading a large model takes minutes: a start slower than this is killed (Type=notify/forking)"
    if key == "Type":
        return "when systemd considers the server started"
    if key in ("PassEnvironment", "UnsetEnvironment"):
        return "which of systemd's own variables reach the server"
    if key in ("CPUAffinity", "NUMAPolicy", "NUMAMask", "Nice", "CPUQuota", "MemoryMax", "MemoryHigh",
               "TasksMax", "IOWeight", "CPUWeight"):
        return "resources the server's processes get"
    if key in ("After", "Before", "Wants", "Requires", "BindsTo", "PartOf", "Requisite", "Conflicts"):
        return "order and dependencies: what starts (or stops) with the server"
    if section == "Install":
        return "whether and where the unit starts at boot (after `systemctl enable`)"
    if key in ("ReadWritePaths", "ReadOnlyPaths", "InaccessiblePaths", "ProtectSystem", "ProtectHome",
               "PrivateTmp", "PrivateDevices", "DeviceAllow"):
        return "sandboxing: a path or a GPU device the server cannot reach fails at start"
    return None


def diff_units(old: Unit, new: Unit, facts: HostFacts | None = None, *,
               old_files: dict[str, dict[str, str] | None] | None = None,
               new_files: dict[str, dict[str, str] | None] | None = None) -> list[UnitChange]:
    """Every directive of the two units besides the command line and Environment= (compared by
    `diff_commands` and `diff_env`): EnvironmentFile= per path, drop-ins, User=, Restart=, limits...
    `old_files`/`new_files`: the env files as read from the host (path -> variables, None: absent)."""
    facts = facts or HostFacts()
    out: list[UnitChange] = []
    a_files = {path: optional for path, optional in old.environment_files}
    b_files = {path: optional for path, optional in new.environment_files}
    for path in sorted(set(a_files) | set(b_files)):
        if path in a_files and path in b_files:
            if a_files[path] != b_files[path]:
                out.append(UnitChange("EnvironmentFile", "changed", ("-" if a_files[path] else "") + path,
                                      ("-" if b_files[path] else "") + path, reason=(
                                          "now optional: a missing file is ignored silently" if b_files[path] else
                                          "now required: a missing file stops the start")))
            continue
        kind = "added" if path in b_files else "removed"
        optional = b_files[path] if kind == "added" else a_files[path]
        shown = ("-" if optional else "") + path
        out.append(UnitChange("EnvironmentFile", kind, shown if kind == "removed" else None,
                              shown if kind == "added" else None,
                              reason=_env_file_reason(kind, path, optional, facts,
                                                      old_files if kind == "removed" else new_files)))
    a_drop = {posixpath.basename(p): p for p in old.dropins}
    b_drop = {posixpath.basename(p): p for p in new.dropins}
    for base in sorted(set(a_drop) ^ set(b_drop)):
        kind = "added" if base in b_drop else "removed"
        out.append(UnitChange("drop-in", kind, a_drop.get(base), b_drop.get(base), reason=(
            "its directives are merged into the new unit (each one is compared here)" if kind == "added" else
            "the old unit's drop-in: what it set no longer applies (each directive is compared here)")))
    a_dirs = {(sec, key): values for sec, key, values in old.directives}
    b_dirs = {(sec, key): values for sec, key, values in new.directives}
    order = [k for k in a_dirs] + [k for k in b_dirs if k not in a_dirs]
    for sec, key in order:
        if (sec, key) in _NOT_UNIT_CHANGES or key == "EnvironmentFile":
            continue
        va, vb = a_dirs.get((sec, key), ()), b_dirs.get((sec, key), ())
        if va == vb:
            continue
        if key in LIST_DIRECTIVES:
            pairs = [("removed", v, None) for v in va if v not in vb] + [("added", None, v) for v in vb if v not in va]
            if not pairs:  # the same values in another order: the order matters for ExecStartPre=
                pairs = [("changed", " ; ".join(va), " ; ".join(vb))]
        elif va and vb:
            pairs = [("changed", va[-1], vb[-1])]
        else:
            pairs = [("added", None, vb[-1])] if vb else [("removed", va[-1], None)]
        for kind, ov, nv in pairs:
            out.append(UnitChange(key, kind, ov, nv, sec, _unit_reason(sec, key, kind, ov, nv, facts)))
    return out


def lint(new: SglangCommand, facts: HostFacts, table: FlagTable | None = None) -> list[Lint]:
    table = table or builtin_table()
    lints: list[Lint] = [Lint(p.severity, p.option, p.message) for p in new.problems]
    for p in new.problems:
        for old_flag, hint in DEPRECATION_HINTS.items():
            if p.option.startswith(old_flag) and p.severity in ("error", "warning"):
                lints.append(Lint("info", p.option, f"use {hint} instead"))
                break
    for flag in PATH_FLAGS:
        value = new.value(flag)
        if not isinstance(value, str) or not value.startswith("/"):
            continue

        # one rule with the gate's: normalised lexically and by the host's realpath (issue 21, item 14)
        prefix = forbidden_prefix(value, facts.forbidden_prefixes, facts.real_paths.get(value))
        forbidden = prefix is not None
        if prefix is not None:
            lints.append(Lint("error", flag, f"{value} is under {prefix}, which this host's profile forbids"))
        exists = facts.paths_exist.get(value)
        if exists is False:
            lints.append(Lint("error", flag, f"{value} does not exist on the host"))
        elif exists and flag == "--model-path" and facts.forbidden_prefixes and not forbidden:
            lints.append(Lint("info", flag, f"{value} exists and is outside {', '.join(facts.forbidden_prefixes)}"))
    cfg = facts.model_config
    algo = new.value("--speculative-algorithm")
    draft = new.value("--speculative-draft-model-path")
    if algo is None:
        stray = [f for f in new.flags if table.specs.get(f) and table.specs[f].category == "speculative"]
        if stray:
            lints.append(Lint("warning", stray[0], f"{', '.join(stray)} without --speculative-algorithm: ignored"))
    elif cfg is not None and str(algo).upper() in ("NEXTN", "EAGLE", "EAGLE3", "MTP"):
        mtp = mtp_layers(cfg)
        if not mtp and not draft:
            lints.append(Lint("error", "--speculative-algorithm",
                              f"{algo} needs MTP layers or a draft model: config.json has no "
                              "mtp_num_hidden_layers/num_nextn_predict_layers and no --speculative-draft-model-path"))
        elif mtp and str(algo).upper() == "NEXTN":
            lints.append(Lint("info", "--speculative-algorithm",
                              f"the model has {counted(mtp, 'MTP layer')}: NEXTN is valid"))
    quant = new.value("--quantization")
    ckpt_quant = checkpoint_quant(cfg)
    if cfg is not None:
        if quant and not ckpt_quant and str(quant) not in ("fp8", "nvfp4_online", "w8a8_int8", "w8a8_fp8",
                                                            "bitsandbytes", "unquant"):
            dt = checkpoint_dtype(cfg) or "unquantized"
            lints.append(Lint("error", "--quantization",
                              f"--quantization {quant} on a checkpoint without quantization_config ({dt})"))
        elif quant and ckpt_quant and str(quant).split("_")[0] not in ckpt_quant:
            lints.append(Lint("warning", "--quantization",
                              f"--quantization {quant} but the checkpoint says {ckpt_quant}"))
        if new.value("--dtype") in (None, "auto") and not quant:
            dt = checkpoint_dtype(cfg)
            if dt:
                lints.append(Lint("info", "--dtype", f"no --dtype: SGLang's auto picks {dt} from the checkpoint"))
    if not quant and not ckpt_quant:
        for flag in new.flags:
            spec = table.specs.get(flag)
            if spec and spec.quantization_specific and flag in ("--fp4-gemm-backend", "--fp8-gemm-backend",
                                                                "--quantization-param-path",
                                                                "--disable-flashinfer-cutlass-moe-fp4-allgather"):
                lints.append(Lint("warning", flag, f"{flag} only applies to {spec.quantization_specific}; "
                                                   "this service has no quantization"))
        runner = new.value("--moe-runner-backend")
        if runner in FP4_MOE_RUNNERS and cfg is not None:
            lints.append(Lint("warning", "--moe-runner-backend",
                              f"{runner} is an FP4/FP8 MoE runner; with a BF16 checkpoint leave it on auto"))
    tp_value = new.value("--tp-size")
    tp = int(tp_value) if isinstance(tp_value, str) and tp_value.isascii() and tp_value.isdigit() \
        and len(tp_value) < 7 else 1
    if tp < 1:
        lints.append(Lint("error", "--tp-size", f"--tp-size {tp_value}: must be at least 1"))
        tp = 1
    tc = _text_config(cfg)
    heads = tc.get("num_attention_heads")
    if isinstance(heads, int) and heads % tp:
        lints.append(Lint("error", "--tp-size", f"TP {tp} does not divide the {heads} attention heads"))
    kv = tc.get("num_key_value_heads")
    if isinstance(kv, int) and tp > kv and tp % kv == 0:
        lints.append(Lint("info", "--tp-size",
                          f"TP {tp} > {kv} KV heads: each KV head is replicated on {tp // kv} GPUs"))
    if facts.gpu_count is not None:
        pp = str(new.value("--pp-size") or 1)
        need = tp * (int(pp) if pp.isascii() and pp.isdigit() and len(pp) < 7 else 1)
        if need > facts.gpu_count:
            lints.append(Lint("error", "--tp-size", f"needs {need} GPUs, the host has {facts.gpu_count}"))
    if any(SECRET_FLAG.search(f) for f in new.flags):
        lints.append(Lint("warning", next(f for f in new.flags if SECRET_FLAG.search(f)),
                          "a secret on the command line is visible in `ps` and /proc to every user; "
                          "use an EnvironmentFile"))
    order = {"error": 0, "warning": 1, "info": 2}
    return sorted(lints, key=lambda x: order.get(x.severity, 3))


def drift(unit_cmd: SglangCommand, running_cmd: SglangCommand, table: FlagTable | None = None) -> list[FlagChange]:
    """Flags where the running process differs from the unit file: 'unit changed but not restarted'."""
    return diff_commands(running_cmd, unit_cmd, table=table)
