#!/usr/bin/python3
"""A STAND-IN `nvidia-smi` for the real-systemd container (there are no GPUs here): it prints what
the simulator's fake prints (console/demo/hostsim/fake_nvidia_smi.py: the same CSV queries and table),
but the memory comes from the processes systemd really runs in this container, never from a
scenario: every live `sglang.launch_server` process holds `--mem-fraction-static` of each GPU its
own CUDA_VISIBLE_DEVICES names (NVIDIA_VISIBLE_DEVICES in a container Docker gave GPUs; read from
/proc/PID/environ), and only while it is alive.

Installed by tests/real/systemd_host.py as /usr/local/bin/nvidia-smi; it says it is a stand-in
on stderr when asked for `--version`."""

from __future__ import annotations

import os
import sys

GPUS = 8
# Where the stand-in runs on a machine shared with other servers (the Docker tests: the containers'
# processes are this machine's), only the servers whose environment carries this tag count.
TAG = os.environ.get("STANDIN_NVIDIA_SMI_TAG")


def _servers() -> list[tuple[int, list[int], float]]:
    """(pid, GPUs, memory fraction) of every live simulated SGLang server, read from /proc."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                argv = [a.decode(errors="replace") for a in fh.read().split(b"\0") if a]
            with open(f"/proc/{entry}/stat") as fh:
                if fh.read().rsplit(")", 1)[1].split()[0] == "Z":
                    continue  # a zombie holds no memory
            with open(f"/proc/{entry}/environ", "rb") as fh:
                env = dict(kv.decode(errors="replace").split("=", 1) for kv in fh.read().split(b"\0") if b"=" in kv)
        except (OSError, IndexError, ValueError):
            continue
        if "sglang.launch_server" not in argv:
            continue
        if TAG and env.get("STANDIN_NVIDIA_SMI_TAG") != TAG:
            continue  # a server of another test on this machine (the Docker tests' stand-in: their own only)
        fraction = 0.85
        if "--mem-fraction-static" in argv[:-1]:
            try:
                fraction = float(argv[argv.index("--mem-fraction-static") + 1])
            except ValueError:
                pass
        # A container given GPUs by Docker (`--gpus '"device=4,5,6,7"'`) names the host's GPUs in
        # NVIDIA_VISIBLE_DEVICES (and sees them as 0..3 inside); a unit names them in CUDA_VISIBLE_DEVICES.
        visible = env.get("NVIDIA_VISIBLE_DEVICES") or env.get("CUDA_VISIBLE_DEVICES", "0")
        gpus = [int(g) for g in visible.split(",") if g.strip().isdigit()]
        out.append((int(entry), [g for g in gpus if 0 <= g < GPUS], fraction))
    return out


def gpu_states_now(_t: float) -> tuple:
    from console.demo.hostsim import story

    holders: dict[int, list[tuple[int, str, int]]] = {i: [] for i in range(GPUS)}
    for pid, gpus, fraction in _servers():
        for g in gpus:
            holders[g].append((pid, "python3", int(story.GPU_TOTAL_MIB * fraction)))
    states = []
    for i in range(GPUS):
        used = 0 + sum(m for _, _, m in holders[i])
        busy = bool(holders[i])
        uuid = f"GPU-5f0c{i:04x}-9d4e-43b1-a7c2-1b8e3f6d{i:04x}"
        states.append(story.SimGpu(i, uuid, min(used, story.GPU_TOTAL_MIB), 0, 45 if busy else 30,
                                   120.0 if busy else 60.0, tuple(holders[i])))
    return tuple(states)


def main() -> int:
    sys.path.insert(0, "/opt/gpuconsole")  # the checkout's console/, mounted read-only
    from console.demo.hostsim import drive, fake_nvidia_smi

    args = sys.argv[1:]
    if "--version" in args:
        print("nvidia-smi stand-in of gpuconsole's real-systemd tests (no GPUs here; memory follows the "
              "live sglang.launch_server processes)")
        return 0
    drive.gpu_states_now = gpu_states_now  # type: ignore[assignment]
    fake_nvidia_smi._speed = lambda: 1.0  # type: ignore[attr-defined]
    return fake_nvidia_smi.main(args, 0.0, print)


if __name__ == "__main__":
    sys.exit(main())
