"""The drain after a stop: which holder of GPU memory let go, in the order it happened, and who is
left.

Fed successive `GpuStatus` readings (any path: NVML, nvidia-smi). A process is keyed by the GPU's
UUID and its pid (the index can change between boots; a pid can hold memory on several GPUs). When
a process leaves a GPU's list, that is one freeing, with the MiB it last held. A GPU reports its own
drain when its memory falls under `drained_mib`, so a GPU whose processes are not visible (a
container's other PID namespace: NVML lists none) still says when it freed, in order with the rest.
Pure: no clock, no I/O; the time of each event is the reading's own sample time.
"""

from __future__ import annotations

from dataclasses import dataclass

from console.model import GpuStatus

DRAINED_MIB = 1024  # under this a GPU holds only contexts of nothing: drained (the controller's threshold)


@dataclass(frozen=True, slots=True)
class Holder:
    gpu_index: int
    gpu_uuid: str
    pid: int
    name: str
    memory_mib: int | None

    def label(self) -> str:
        mib = "?" if self.memory_mib is None else f"{self.memory_mib:,}"
        return f"GPU {self.gpu_index}: pid {self.pid} {self.name} {mib} MiB"


@dataclass(frozen=True, slots=True)
class Freed:
    at_s: float | None
    gpu_index: int
    gpu_uuid: str
    pid: int | None  # None: the GPU itself fell under the threshold (with or without processes listed)
    name: str
    memory_mib: int | None  # what it last held

    def label(self) -> str:
        mib = "?" if self.memory_mib is None else f"{self.memory_mib:,}"
        if self.pid is None:
            return f"GPU {self.gpu_index} drained (from {mib} MiB)"
        return f"GPU {self.gpu_index}: pid {self.pid} {self.name} freed {mib} MiB"


def _key(uuid: str | None, index: int) -> str:
    return uuid or f"index {index}"


class DrainWatch:
    """Follows the holders across readings; `update` returns the new freeings in observed order."""

    def __init__(self, drained_mib: int = DRAINED_MIB) -> None:
        self.drained_mib = drained_mib
        self.freed: list[Freed] = []
        self._held: dict[tuple[str, int], Holder] = {}
        self._gpu_used: dict[str, tuple[int, int]] = {}  # uuid -> (index, MiB) of GPUs still over the threshold
        self._last: GpuStatus | None = None

    def update(self, status: GpuStatus) -> list[Freed]:
        at = status.sampled_at_s
        now: dict[tuple[str, int], Holder] = {}
        seen_gpus: set[str] = set()
        new: list[Freed] = []
        gpu_drained: list[Freed] = []
        for g in sorted(status.gpus, key=lambda d: d.index):
            if g.error or g.lost_at_s is not None:
                continue  # a GPU we cannot read has not drained: keep its holders as they were
            key = _key(g.uuid, g.index)
            seen_gpus.add(key)
            for p in g.processes:
                # The first name seen stays: a process that is exiting loses its NVML name.
                prev = self._held.get((key, p.pid))
                name = prev.name if prev is not None and prev.name not in ("", "?") else p.name
                now[(key, p.pid)] = Holder(g.index, key, p.pid, name, p.memory_mib)
            used = g.memory_used_mib
            if used is None:
                continue
            if used > self.drained_mib:
                self._gpu_used[key] = (g.index, used)
            elif key in self._gpu_used:  # this GPU fell under the threshold: drained, after its processes
                index, last = self._gpu_used.pop(key)
                gpu_drained.append(Freed(at, index, key, None, "", last))
        for (gpu, pid), holder in self._held.items():
            if gpu in seen_gpus and (gpu, pid) not in now:
                new.append(Freed(at, holder.gpu_index, gpu, pid, holder.name, holder.memory_mib))
        for (gpu, pid), holder in self._held.items():
            if gpu not in seen_gpus:
                now[(gpu, pid)] = holder
        new += gpu_drained
        self._held = now
        self.freed.extend(new)
        self._last = status
        return new

    @property
    def holders(self) -> list[Holder]:
        """Who still holds memory, largest first."""
        return sorted(self._held.values(), key=lambda h: (-(h.memory_mib or 0), h.gpu_index, h.pid))

    def drained(self) -> bool:
        """Every readable GPU under the threshold (processes or not)."""
        status = self._last
        if status is None:
            return False
        return all((g.memory_used_mib or 0) <= self.drained_mib for g in status.gpus
                   if g.error is None and g.lost_at_s is None)

    def detail(self, limit: int = 4) -> str:
        """One line for the step: what freed (in order) and who is left."""
        parts = []
        if self.freed:
            parts.append(", ".join(f.label() for f in self.freed[-limit:]))
        held = self.holders
        if held:
            more = f" (+{len(held) - limit} more)" if len(held) > limit else ""
            parts.append("still held by " + ", ".join(h.label() for h in held[:limit]) + more)
        elif self._gpu_used:
            parts.append("still in use: " + ", ".join(f"GPU {i} {mib:,} MiB" for i, mib in
                                                      sorted(self._gpu_used.values())))
        return "; ".join(parts)
