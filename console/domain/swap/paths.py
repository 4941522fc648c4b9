"""Which way to swap with the least downtime: in place, beside, or restart (issue 24).

Pure: host facts in (the two checkpoints' config.json, the GPU reading, the fit planner's answer,
the restart prediction), a `PathPlan` out. Each path carries its predicted downtime and, when it
is not possible, the exact reason; the plan names why every faster path was not taken.

- in place: SGLang's `POST /update_weights_from_disk` loads the new weights into the running
  server. Only when the new checkpoint has the very architecture served: every field that shapes
  the model's tensors (layers, widths, heads, experts, vocab, quantization, dtype) must be equal;
  one field differing means the loader would fail or, worse, load mismatched tensors.
- beside: the new server boots on GPUs the old one does not use (a unit's CUDA_VISIBLE_DEVICES, a
  container's `--gpus` request; another port) when the fit planner says it fits there; traffic moves
  after it is ready. Downtime 0.
- restart: stop, then start (today's path), with the prediction from this host's boots.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from console.domain.analysis.fit import FitInputs, FitResult, plan_fit, text_config

PATHS = ("in-place", "beside", "restart")
DRAINED_MIB = 1024  # a GPU holding less than this holds no server (the CUDA context of nothing)

# The config fields that shape the served model's tensors. Read from the top level and from a
# nested `text_config` (Qwen3.5 wraps its text model). `dtype`/`torch_dtype` are one field: newer
# transformers write `dtype`, older `torch_dtype` (research/qwen35_fit.md §2.1).
ARCH_FIELDS: tuple[str, ...] = (
    "architectures", "model_type", "num_hidden_layers", "hidden_size", "intermediate_size",
    "num_attention_heads", "num_key_value_heads", "head_dim", "num_experts", "num_local_experts",
    "n_routed_experts", "num_experts_per_tok", "moe_intermediate_size", "shared_expert_intermediate_size",
    "vocab_size", "quantization_config", "dtype", "layer_types", "full_attention_interval",
    "linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim", "linear_value_head_dim",
    "linear_conv_kernel_dim", "mtp_num_hidden_layers", "tie_word_embeddings", "kv_lora_rank",
    "q_lora_rank", "qk_rope_head_dim", "v_head_dim", "first_k_dense_replace",
)
# Flags of the unit that may change with an in-place update: the weights' path and names only.
# Any other flag changing (tp size, quantization, speculative decoding...) needs a restart.
IN_PLACE_FLAGS = ("--model-path", "--served-model-name", "--weight-version")


@dataclass(frozen=True, slots=True)
class FieldDiff:
    name: str
    old: str  # JSON text of the value; "(absent)" when the config has none
    new: str

    def line(self) -> str:
        return f"{self.name}: {self.old} → {self.new}"


def _value(config: dict[str, Any], name: str) -> Any:
    merged = text_config(config)
    if name == "dtype":
        for key in ("dtype", "torch_dtype"):
            for src in (merged, config):
                if src.get(key) is not None:
                    return src[key]
        return None
    if name in ("architectures", "model_type", "quantization_config"):
        # The wrapper's identity and quantization are the top level's; a nested one counts too.
        return config.get(name) if config.get(name) is not None else merged.get(name)
    return merged.get(name)


def _text(value: Any) -> str:
    if value is None:
        return "(absent)"
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"))[:200]
    except (TypeError, ValueError):
        return repr(value)[:200]


def config_differences(old: dict[str, Any], new: dict[str, Any],
                       fields: Sequence[str] = ARCH_FIELDS) -> tuple[FieldDiff, ...]:
    """The architecture fields whose values differ (a field absent from both is equal)."""
    out: list[FieldDiff] = []
    for name in fields:
        a, b = _value(old, name), _value(new, name)
        if _text(a) != _text(b):
            out.append(FieldDiff(name, _text(a), _text(b)))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class PathOption:
    path: str  # one of PATHS
    possible: bool
    predicted_downtime_s: float | None  # None: cannot tell (said in `reason`)
    reason: str  # why possible, or exactly why not
    details: tuple[str, ...] = ()  # how the prediction was made, what the operator must do
    differing_fields: tuple[FieldDiff, ...] = ()
    gpus: tuple[int, ...] = ()  # beside: the GPUs it boots on
    port: int | None = None  # beside: its port

    @property
    def cuda_visible_devices(self) -> str | None:
        return ",".join(str(g) for g in self.gpus) if self.gpus else None

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "possible": self.possible, "predicted_downtime_s": self.predicted_downtime_s,
                "reason": self.reason, "details": list(self.details),
                "differing_fields": [{"field": d.name, "old": d.old, "new": d.new} for d in self.differing_fields],
                "gpus": list(self.gpus), "cuda_visible_devices": self.cuda_visible_devices, "port": self.port}


@dataclass(frozen=True, slots=True)
class PathPlan:
    options: tuple[PathOption, ...]  # in PATHS order
    chosen: str
    forced: bool = False  # the operator asked for this path (it still must be possible)

    def option(self, path: str) -> PathOption:
        return next(o for o in self.options if o.path == path)

    @property
    def chosen_option(self) -> PathOption:
        return self.option(self.chosen)

    def lines(self) -> list[str]:
        """What the gate shows: the chosen path with its prediction, then why the faster ones were not."""
        chosen = self.chosen_option
        out = [f"{chosen.path}: {_downtime_text(chosen.predicted_downtime_s)}: {chosen.reason}"]
        out += [f"  {d}" for d in chosen.details]
        for o in self.options:
            if o.path == chosen.path:
                continue
            if PATHS.index(o.path) < PATHS.index(chosen.path) or not o.possible:
                out.append(f"{o.path}: not possible: {o.reason}" if not o.possible else
                           f"{o.path}: possible ({_downtime_text(o.predicted_downtime_s)}), not chosen")
        return out

    def to_json(self) -> dict[str, Any]:
        return {"chosen": self.chosen, "forced": self.forced, "options": [o.to_json() for o in self.options]}


def _downtime_text(seconds: float | None) -> str:
    if seconds is None:
        return "predicted downtime unknown"
    return f"predicted downtime {format_duration(seconds)}"


def format_duration(seconds: float) -> str:
    s = max(0, round(seconds))
    if s < 60:
        return f"{s}s"
    m, s = divmod(s, 60)
    return f"{m}m{s:02d}s" if m < 60 else f"{m // 60}h{m % 60:02d}m"


def free_gpus(gpu_status: Any, old_pids: Iterable[int] = ()) -> tuple[list[int], list[str]]:
    """GPUs no server uses, from the GPU reading: no compute process on it and (nearly) no memory
    held. (indices, why the others are not free). A GPU whose reading is lost or in error is not free."""
    if gpu_status is None:
        return [], ["no GPU reading yet"]
    old = set(old_pids)
    free: list[int] = []
    busy: list[str] = []
    for g in gpu_status.gpus:
        if g.lost_at_s is not None or g.error:
            busy.append(f"GPU {g.index}: {g.error or 'reading lost'}")
            continue
        procs = tuple(g.processes or ())
        if procs:
            who = ", ".join(f"pid {p.pid}" + (" (the old server)" if p.pid in old else "") for p in procs[:3])
            busy.append(f"GPU {g.index}: {who}")
            continue
        if g.memory_used_mib is None or g.memory_used_mib > DRAINED_MIB:
            busy.append(f"GPU {g.index}: {g.memory_used_mib if g.memory_used_mib is not None else '?'} MiB in use")
            continue
        free.append(g.index)
    return free, busy


def gpu_assignment(gpus: Sequence[int], *, container: bool = False, compose: bool = False) -> str:
    """How the beside server is given its GPUs, as the operator would write it: a unit's
    CUDA_VISIBLE_DEVICES (the drafted unit gets it), a container's `--gpus` request (its launch), a
    compose service's GPU reservation in its compose file (Compose passes it to Docker: no `--gpus`)."""
    ids = ",".join(str(g) for g in gpus)
    if compose:
        listed = ", ".join(f'"{g}"' for g in gpus)
        return f"device_ids [{listed}] of the compose service's deploy.resources.reservations"
    return f"--gpus '\"device={ids}\"'" if container else f"CUDA_VISIBLE_DEVICES={ids}"


def in_place_option(old_config: dict[str, Any] | None, new_config: dict[str, Any] | None,
                    flag_changes: Sequence[str] = (), *, pause_s: float | None = None,
                    pause_detail: str = "", server_ready: bool = True, container: bool = False) -> PathOption:
    """The in-place path: possible only with equal architectures and no flag change but the weights'
    (`container`: the new service is a container's launch, not a unit)."""
    if old_config is None or new_config is None:
        which = "the served model's" if old_config is None else "the new checkpoint's"
        return PathOption("in-place", False, None, f"{which} config.json is not known: cannot compare architectures")
    diffs = config_differences(old_config, new_config)
    if diffs:
        names = ", ".join(d.name for d in diffs)
        return PathOption("in-place", False, None, f"architecture differs ({names})",
                          tuple(d.line() for d in diffs), diffs)
    other = [f for f in flag_changes if f not in IN_PLACE_FLAGS]
    if other:
        return PathOption("in-place", False, None,
                          f"the new {'container' if container else 'unit'} changes {', '.join(other)} "
                          "(only a restart applies server flags)")
    if not server_ready:
        return PathOption("in-place", False, None, "the old server is not ready: nothing to update in place")
    details = ["POST /update_weights_from_disk: requests pause while the weights load, none is dropped",
               # a unit's file is rewritten, so its next restart launches the new weights; a container's
               # launch is fixed when it is created: the running one's restart has the old weights
               "the new container is on the host, not started: a later restart must start it (the running "
               "container's own launch has the old weights)" if container else
               "the new service is installed (not restarted), so a later restart serves the same model",
               "if the reply says it failed, SGLang keeps the old weights serving; if the server dies, "
               "rollback by restart of the old service"]
    if pause_detail:
        details.insert(0, pause_detail)
    return PathOption("in-place", True, pause_s, "same architecture: the weights are updated in the running server",
                      tuple(details))


def beside_option(fit_inputs: FitInputs | None, gpu_status: Any, *, old_pids: Iterable[int] = (),
                  old_port: int | None = None, port: int | None = None, router: str | None = None,
                  fit: FitResult | None = None, container: bool = False, compose: bool = False) -> PathOption:
    """The beside path: the new model's TP size on free GPUs, where the fit planner says it fits
    (`container`: its GPUs are its launch's `--gpus` request, not a unit's environment; `compose`: its
    compose file's GPU reservation)."""
    free, busy = free_gpus(gpu_status, old_pids)
    if fit_inputs is None:
        return PathOption("beside", False, None, "the new model's fit is not known (config.json or weights missing)")
    tp = max(1, fit_inputs.tp) * max(1, fit_inputs.pp)
    if len(free) < tp:
        why = f"no free GPUs: the new server needs {tp}, {len(free)} free" + (f" ({'; '.join(busy[:4])})" if busy
                                                                              else "")
        return PathOption("beside", False, None, why)
    gpus = tuple(free[:tp])
    total_mib = [g.memory_total_mib for g in gpu_status.gpus if g.index in gpus and g.memory_total_mib]
    if len(total_mib) < tp:
        return PathOption("beside", False, None, "the free GPUs' memory is not known")
    gib = min(total_mib) / 1024
    result = fit or plan_fit(FitInputs(**{**{f: getattr(fit_inputs, f) for f in fit_inputs.__slots__},
                                          "gpu_count": tp, "gpu_mem_gib": gib}))
    if result.fits is not True:
        return PathOption("beside", False, None, f"does not fit on GPUs {','.join(map(str, gpus))} ({gib:.0f} GiB "
                                                 f"each): {result.verdict}, {result.binding_constraint}")
    new_port = port if port is not None else ((old_port + 1) if old_port else None)
    if new_port is None:
        return PathOption("beside", False, None, "no port for the new server (the old one's is not known)")
    if new_port == old_port:
        return PathOption("beside", False, None, f"the new server's port {new_port} is the old one's")
    given = gpu_assignment(gpus, container=container, compose=compose)
    details = [f"boots on GPUs {','.join(map(str, gpus))} ({given}), "
               f"port {new_port}, while the old server keeps serving",
               f"fit: {result.verdict} ({result.weights_gib:.1f} GiB weights/GPU, "
               f"{result.max_total_tokens:,} KV tokens)"]
    if router:
        details.append(f"then the router {router}: add the new worker, drain and remove the old one, stop the old")
    else:
        details.append(f"then the operator switches clients from port {old_port} to {new_port} "
                       "(no router in the profile), and the old server is stopped")
    return PathOption("beside", True, 0.0, "fits on GPUs the old server does not use", tuple(details),
                      gpus=gpus, port=new_port)


def restart_option(predicted_s: float | None, text: str) -> PathOption:
    # The prediction's text names the path and its downtime; the plan's line says those once.
    reason = re.sub(r"^restart: predicted downtime (\S+|unknown): ", "", text or "")
    return PathOption("restart", True, predicted_s, reason or "stop the old server, then start the new one")


def choose(in_place: PathOption, beside: PathOption, restart: PathOption, *, want: str | None = None) -> PathPlan:
    """The possible path with the least downtime (in-place's pause vs beside's 0: beside wins only
    when in place is not possible; the pause is seconds and costs no second set of GPUs)."""
    options = (in_place, beside, restart)
    if want is not None:
        if want not in PATHS:
            raise ValueError(f"no such path: {want!r} (one of {', '.join(PATHS)})")
        opt = next(o for o in options if o.path == want)
        if not opt.possible:
            raise ValueError(f"{want} is not possible: {opt.reason}")
        return PathPlan(options, want, forced=True)
    chosen = next(o for o in options if o.possible)
    return PathPlan(options, chosen.path)


def flag_changes(old_cmd: Any, new_cmd: Any) -> list[str]:
    """The flags whose values differ between two normalized SGLang commands (console.host.parsers)."""
    if old_cmd is None or new_cmd is None:
        return []
    names = set(getattr(old_cmd, "flags", {}) or {}) | set(getattr(new_cmd, "flags", {}) or {})
    return sorted(n for n in names if old_cmd.value(n) != new_cmd.value(n))


__all__ = ["ARCH_FIELDS", "PATHS", "FieldDiff", "PathOption", "PathPlan", "beside_option", "choose",
           "config_differences", "flag_changes", "format_duration", "free_gpus", "gpu_assignment", "in_place_option",
           "restart_option"]
