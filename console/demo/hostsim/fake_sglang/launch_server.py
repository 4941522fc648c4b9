"""`python -m sglang.launch_server` on the simulated host: stdlib only (the host's python3).

`--help` prints SGLang 0.5.23's real option list (the argparse table the console ships), and bad
flags fail as they do in SGLang. Otherwise it boots along the story, logging in SGLang's real
formats (per TP rank), then serves on 127.0.0.1 (whatever --host says: the simulator never
listens beyond loopback): /health, /health_generate, /server_info, /v1/models, /metrics and
streaming /v1/completions and /v1/chat/completions with realistic timing.
"""

import argparse
import ctypes
import json
import os
import random
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from console.demo.hostsim import pagecache, story
from console.demo.hostsim.fake_sglang import multinode
from console.demo.hostsim.fake_sglang.httpd import SimHttpd
from console.demo.hostsim.fake_sglang.lifecycle import Lifecycle
from console.locations import DATA_DIR

SPEED = float(os.environ.get("GPUSIM_SPEED", "1") or 1)
# Boot timeline, seconds after the process starts (story.T_NEW_START): see console/demo/hostsim/story.py.
BOOT = [(0.3, "launch"), (4.0, "weights loading"), (14.0, "weights loaded"), (16.0, "caches"),
        (17.0, "graphs"), (22.0, "graphs done"), (23.0, "http"), (25.0, "ready")]
# Issue 24: with GPUSIM_PAGECACHE_MODEL=1 the weights phase (of a boot and of an in-place update)
# takes as long as console/demo/hostsim/pagecache.py's model says for the shards of --model-path: the
# cold bytes at the simulated disk's rate, the cached ones at the simulated page cache's. Those
# rates are simulator parameters, never measurements. Logged durations are the simulated host's
# own (wall) seconds, as a real server logs what it took.
PAGECACHE_MODEL = os.environ.get("GPUSIM_PAGECACHE_MODEL") == "1"
# Tests: the ready line written this far into a second (0.7: stamped T, written at T+0.7), as a
# real server's line can be; its journal or Docker time then differs from its whole-second stamp.
READY_LATE_IN_SECOND = float(os.environ.get("GPUSIM_READY_LATE_IN_SECOND", "0") or 0)
GRAPHS_S = 5.0  # scenario seconds of CUDA graph capture


def build_parser():
    data = json.loads((DATA_DIR / "sglang_flags_0.5.23.json").read_text())
    parser = argparse.ArgumentParser(prog="sglang serve")
    for flag in data["flags"]:
        names = [flag["flag"], *flag["aliases"]]
        helptext = flag["help"].replace("%", "%%")
        if flag["takes_value"]:
            nargs = "+" if "nargs=+" in flag["type"] else "*" if "nargs=*" in flag["type"] else None
            parser.add_argument(*names, dest=flag["dest"], nargs=nargs, help=helptext)
        elif "--no-" in flag["type"]:
            parser.add_argument(*names, dest=flag["dest"], action=argparse.BooleanOptionalAction, help=helptext)
        else:
            parser.add_argument(*names, dest=flag["dest"], action="store_true", help=helptext)
    return parser


class Server:
    def __init__(self, args, argv):
        self.args = args
        self.argv = argv
        self.started = time.time()
        self.tp = int(args.tp_size or 1)
        self.name = args.served_model_name or args.model_path
        self.spec = (args.speculative_algorithm or "").upper() in ("NEXTN", "EAGLE", "EAGLE3")
        self.ready = False
        self.lock = threading.Lock()
        self.running = 0
        self.tokens_out = 0
        self.prompt_tokens = 0
        self.requests = 0
        self.accepted = 0
        self.verify_steps = 0
        self.last_gen_throughput = 0.0
        self.oom = os.environ.get("GPUSIM_OOM") == "1"
        self.model_path = args.model_path
        self.weight_version = getattr(args, "weight_version", None) or "default"
        self.boot_plan = list(BOOT)
        self.weights_s = 9.87 * 1.0  # scenario seconds (the story's fixed boot)
        # /update_weights_from_disk: new requests wait while the weights load (SGLang's model
        # update lock); they are the "paused" requests the reply counts.
        self.updating = threading.Event()
        self.updated = threading.Condition(self.lock)
        self.paused_now = 0
        self.update_lock = threading.Lock()
        if PAGECACHE_MODEL and os.environ.get("GPUSIM_BOOTED") != "1":
            self.weights_s = pagecache.load_seconds(args.model_path or "")[0]
            w = self.weights_s
            self.boot_plan = [(0.3, "launch"), (4.0, "weights loading"), (4.0 + w, "weights loaded"),
                              (6.0 + w, "caches"), (7.0 + w, "graphs"), (7.0 + w + GRAPHS_S, "graphs done"),
                              (8.0 + w + GRAPHS_S, "http"), (10.0 + w + GRAPHS_S, "ready")]
        self.lifecycle = None  # issue 24: set by main() (the simulated GPUs read it)
        # Issue 37: one node of a multi-node server (fake_sglang/multinode.py). Node R runs its
        # share of the TP ranks; only node 0 serves the API, the others a dummy health server.

        self.nnodes = max(1, int(getattr(args, "nnodes", None) or 1))
        self.node_rank = int(getattr(args, "node_rank", None) or 0)
        self.ranks = multinode.local_ranks(self.tp, self.nnodes, self.node_rank) if self.nnodes > 1 \
            else list(range(self.tp))
        self.dummy = self.nnodes > 1 and self.node_rank >= 1
        self.peers = []  # rank 0: the other nodes' store connections
        self.store = None  # rank >= 1: this node's connection to rank 0's store
        self.http_up = threading.Event()

    def start_lifecycle(self, booted):
        plan = dict((s, at) for at, s in self.boot_plan)
        weights = plan.get("weights loaded", 14.0) - plan.get("weights loading", 4.0)
        graphs = plan.get("graphs done", 22.0) - plan.get("graphs", 17.0)
        self.lifecycle = Lifecycle(dict(os.environ), self.tp, weights_s=weights, graphs_s=graphs, booted=booted)

    def end(self, why, code):
        if self.lifecycle is not None:
            self.lifecycle.ended(why)
        os._exit(code)

    # -- logging ------------------------------------------------------------------------
    # Lines of SGLang's HTTP server process (uvicorn's and its access lines, the args dump, "fired
    # up") carry no rank: only the scheduler processes' lines do (tests/data/sglang_real_lines.txt
    # lines 10, 11, 19, 20; tests/demo/test_fakes_real.py compares).
    HTTP_PROCESS = ("INFO:", "server_args=", "The server is fired up")

    def log(self, message, rank=None, all_ranks=False):
        now = time.time()
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now))
        if os.environ.get("SGLANG_LOG_MS", "").lower() in ("1", "true"):  # SGLang's own switch
            stamp += f".{int(now * 1000) % 1000:03d}"
        if message.startswith(self.HTTP_PROCESS):
            sys.stdout.write(f"[{stamp}] {message}\n")
            sys.stdout.flush()
            return
        ranks = self.ranks if all_ranks else [self.ranks[0] if rank is None else rank]
        for r in ranks:
            # " TP{r}" only when tp_size > 1, as the scheduler's prefix has it (research notes §1)
            prefix = f"[{stamp} TP{r}]" if self.tp > 1 else f"[{stamp}]"
            sys.stdout.write(f"{prefix} {message}\n")
        sys.stdout.flush()

    def boot(self):
        a = self.args
        steps = {
            "launch": lambda: self.log(f"server_args=ServerArgs(model_path='{a.model_path}', "
                                       f"served_model_name='{self.name}', tp_size={self.tp}, "
                                       f"speculative_algorithm={a.speculative_algorithm!r}, "
                                       f"mem_fraction_static={a.mem_fraction_static}, port={a.port})"),
            "weights loading": lambda: self.log("Load weight begin. avail mem=94.21 GB", all_ranks=True),
            "weights loaded": self.weights_loaded,
            "caches": self.caches,
            "graphs": self.graphs,
            "graphs done": self.graphs_done,
            "http": lambda: self.log(f"INFO:     Uvicorn running on http://{a.host or '127.0.0.1'}:{a.port} "
                                     "(Press CTRL+C to quit)"),
            "ready": self.fired_up,
        }

        if self.dummy:  # node rank >= 1: no API; a dummy health server once its schedulers are up
            steps["http"] = self.dummy_health
            steps["ready"] = lambda: None
        for at, step in self.boot_plan:
            delay = self.started + at / SPEED - time.time()
            if delay > 0:
                time.sleep(delay)
            if self.lifecycle is not None:  # issue 24: the simulated GPUs fill as this phase begins
                self.lifecycle.phase(step)
            steps[step]()
            if step == "http":
                self.http_up.set()
            if step == "launch" and self.nnodes > 1:
                self.dist_init()
            if step == "weights loading" and self.nnodes > 1:
                self.check_weights()
            if step == "weights loaded" and self.nnodes > 1:
                multinode.barrier(self.peers, self.store)

    # -- issue 37: distributed init across nodes (multinode.py) ------------------------------
    def dist_init(self):
        a = self.args
        began = time.time()
        self.log("Init torch distributed begin.", all_ranks=True)
        addr = multinode.split_addr(a.dist_init_addr or "")
        timeout_s = float(a.dist_timeout or 600) / SPEED
        if addr is None:  # SGLang falls back to this node's own address: the nodes never meet
            addr = ("127.0.0.1", 1)
        if self.node_rank == 0:
            ok, joined, self.peers = multinode.host_store(addr, self.nnodes, timeout_s)
            if not ok:
                sys.stdout.write(f"torch.distributed.DistStoreError: Timed out after {float(a.dist_timeout or 600) + 1:.0f} "
                                 f"seconds waiting for clients. {joined}/{self.nnodes} clients joined.\n")
                sys.stdout.flush()
                self.end("distributed init timed out", 1)
        elif (mine := multinode.join_store(addr, self.node_rank, timeout_s)) is None:
            sys.stdout.write(f"torch.distributed.DistNetworkError: The client socket has timed out after "
                             f"{int(float(a.dist_timeout or 600) * 1000)}ms while trying to connect to "
                             f"({addr[0]}, {addr[1]}).\n")
            sys.stdout.flush()
            self.end("distributed init timed out", 1)
        else:
            self.store = mine
        world = self.tp
        for r in self.ranks:
            sys.stdout.write(f"[Gloo] Rank {r} is connected to {world - 1} peer ranks. "
                             f"Expected number of connected peer ranks is : {world - 1}\n")
        sys.stdout.flush()
        waited = time.time() - began
        self.log(f"Init torch distributed ends. elapsed={waited:.2f} s, mem usage=0.45 GB", all_ranks=True)
        self.started += waited  # the rest of the boot follows the rendezvous

    def check_weights(self):
        missing = multinode.incomplete_download(self.model_path or "")
        if missing is None:
            return
        self.log("Scheduler hit an exception: Traceback (most recent call last):")
        sys.stdout.write(f"FileNotFoundError: [Errno 2] No such file or directory: '{missing}'\n")
        sys.stdout.flush()
        self.end("weights missing", 1)

    def dummy_health(self):
        a = self.args
        self.ready = True
        self.http_up.set()
        self.log(f"Dummy health check server started in background thread at {a.host or '127.0.0.1'}:{a.port}")

    def weights_loaded(self):
        elapsed = self.weights_s / SPEED if PAGECACHE_MODEL else 9.87
        usage = 58.03  # the story's 122B at TP4
        if PAGECACHE_MODEL:
            # the weights this server read: its shards' bytes over its ranks (a real server logs
            # what it loaded, whichever model it is; the old 397B's boot said the 122B's figure)
            total = pagecache.model_bytes(self.model_path or "")[0]
            usage = total / max(1, self.tp) / (1 << 30) + 0.08 if total else usage
        self.log(f"Load weight end. elapsed={elapsed:.2f} s, type=Qwen3_5MoeForConditionalGeneration, "
                 f"avail mem=36.18 GB, mem usage={usage:.2f} GB.", all_ranks=True)
        if PAGECACHE_MODEL:
            pagecache.mark_read(self.model_path or "")

    # -- POST /update_weights_from_disk (SGLang's request and reply; see tests/data/PROVENANCE.md) ----
    def update_weights_from_disk(self, req):
        """(HTTP status, reply). Loads the new checkpoint's weights into the running server: requests
        arriving meanwhile wait; a checkpoint whose tensors do not match fails and the old weights
        keep serving, as SGLang's loader rolls back."""
        path = req.get("model_path")
        if not isinstance(path, str) or not path:
            return 400, {"success": False, "message": "model_path is required", "num_paused_requests": 0}
        # In a container the path is the container's: read it through its bind mount ("HOST:INSIDE").
        host, _, inside = os.environ.get("GPUSIM_CONTAINER_MOUNT", "").rpartition(":")
        if host and inside and (path == inside or path.startswith(inside.rstrip("/") + "/")):
            path = host + path[len(inside.rstrip("/")):]
        if not self.update_lock.acquire(blocking=False):
            return 400, {"success": False, "message": "another weight update is in progress",
                         "num_paused_requests": 0}
        try:
            return self._update(path, req)
        finally:
            self.update_lock.release()

    def _update(self, path, req):
        with self.lock:
            self.paused_now = 0
            self.updating.set()
        try:
            # SGLang's writer lock: the requests in flight finish first; new ones wait behind it.
            deadline = time.time() + 60 / SPEED
            while time.time() < deadline:
                with self.lock:
                    if self.running == 0:
                        break
                time.sleep(0.01)
            self.log("Update engine weights online from disk begin. avail mem=4.26 GB", all_ranks=True)
            new_cfg = _config(path)
            if new_cfg is None:
                msg = (f"Failed to get weights iterator: Cannot find any model weights with `{path}`.")
                self.log(msg)
                return 400, {"success": False, "message": msg, "num_paused_requests": self.paused_now}
            seconds = pagecache.load_seconds(path)[0] if PAGECACHE_MODEL else 8.0
            fail = os.environ.get("GPUSIM_UPDATE_FAIL") == "1" or _arch(new_cfg) != _arch(_config(self.model_path))
            die = os.environ.get("GPUSIM_UPDATE_DIE") == "1"
            time.sleep(seconds / SPEED * (0.5 if fail or die else 1.0))
            if die:
                self.log("Scheduler hit an exception: Traceback (most recent call last):")
                sys.stdout.write("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB. GPU 0 has a "
                                 "total capacity of 95.59 GiB of which 0.98 GiB is free.\n")
                sys.stdout.flush()
                self.end("died during the update", 1)
            if fail:
                msg = ("Failed to update weights: Unexpected key(s) in the checkpoint: "
                       "'model.language_model.layers.48.mlp.gate.weight'.\nRolling back to original weights.")
                self.log(msg.replace("\n", " "))
                time.sleep(seconds / SPEED * 0.5)  # the rollback reads the old weights again
                return 400, {"success": False, "message": msg, "num_paused_requests": self.paused_now}
            self.model_path = path
            if isinstance(req.get("weight_version"), str) and req["weight_version"]:
                self.weight_version = req["weight_version"]
            if PAGECACHE_MODEL:
                pagecache.mark_read(path)
            self.log("Update weights end.", all_ranks=True)
            return 200, {"success": True, "message": "Succeeded to update model weights.",
                         "num_paused_requests": self.paused_now}
        finally:
            with self.lock:
                self.updating.clear()
                self.updated.notify_all()

    def wait_if_updating(self):
        with self.lock:
            if not self.updating.is_set():
                return
            self.paused_now += 1
            while self.updating.is_set():
                self.updated.wait(1.0)

    def caches(self):
        # What SGLang would log for the 122B at TP4 on 4 x 96 GB with MTP: ~1 % off the console's
        # fit prediction (127 slots, 903,040 tokens), as a real run would be.
        self.log("Mamba Cache is allocated. max_mamba_cache_size: 125, conv_state size: 0.33GB, "
                 "ssm_state size: 4.25GB intermediate_ssm_state_cache size: 6.95GB "
                 "intermediate_conv_window_cache size: 0.06GB", all_ranks=True)
        self.log("KV Cache is allocated. dtype: torch.bfloat16, #tokens: 893440, K size: 5.11 GB, "
                 "V size: 5.11 GB", all_ranks=True)

    def graphs(self):
        self.graphs_began = time.time()
        self.log("Capture target decode CUDA graph begin. backend=full, num_tokens_per_req=4, avail mem=5.84 GB",
                 all_ranks=True)

    def graphs_done(self):
        if self.oom:
            self.log("Scheduler hit an exception: Traceback (most recent call last):")
            for line in ('  File "sglang/srt/managers/scheduler.py", line 3011, in run_scheduler_process',
                         "    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, dp_rank)",
                         "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
                         "total capacity of 95.59 GiB of which 1.12 GiB is free."):
                sys.stdout.write(line + "\n")
            stamp = time.strftime("%Y-%m-%d %H:%M:%S")
            sys.stdout.write(f"[{stamp}] Received sigquit from a child process. It usually means the child failed.\n")
            sys.stdout.flush()
            self.end("out of memory", 1)
        # With the page-cache model the boot runs on the simulated host's own clock and logs what it
        # took, as the weights phase does (the story's fixed boot keeps its scripted 4.92 s).
        began = getattr(self, "graphs_began", None)
        elapsed = time.time() - began if PAGECACHE_MODEL and began is not None else 4.92
        self.log(f"Capture target decode CUDA graph end. bs=[1, 2, 4, 8, 16, 24, 32, 40, 48], elapsed={elapsed:.2f} s, "
                 "mem usage=1.58 GB, avail mem=4.26 GB.", all_ranks=True)
        if 0 in self.ranks:  # TP rank 0 only
            self.log("max_total_num_tokens=893440, chunked_prefill_size=8192, max_prefill_tokens=16384, "
                     "max_running_requests=41, context_len=262144, available_gpu_mem=4.26 GB")

    def fired_up(self):
        self.ready = True
        self.http_up.set()
        self.log("INFO:     127.0.0.1:40052 - \"GET /model_info HTTP/1.1\" 200 OK")
        if READY_LATE_IN_SECOND:
            into = time.time() % 1.0
            time.sleep((READY_LATE_IN_SECOND - into) % 1.0)
        self.log("The server is fired up and ready to roll!")

    # -- serving ------------------------------------------------------------------------
    def background_running(self):
        t = (time.time() - float(os.environ.get("GPUSIM_START", self.started))) * SPEED
        return max(0, round(story.traffic(t) * 12))

    def stats_loop(self):
        last_tokens, last_t = 0, time.time()
        while True:
            time.sleep(1.0 / SPEED)
            if not self.ready or 0 not in self.ranks:  # batch lines: TP rank 0's node only
                continue
            now = time.time()
            with self.lock:
                produced = self.tokens_out - last_tokens
                last_tokens = self.tokens_out
                running = self.running + self.background_running()
                accept = (self.accepted / self.verify_steps) if self.verify_steps else 3.1
            gen = produced / (now - last_t) + self.background_running() * 58.0
            last_t = now
            self.last_gen_throughput = gen
            full_tokens = running * 2400
            fields = [f"#running-req: {running}", f"#full token: {full_tokens}",
                      f"full token usage: {full_tokens / 893440:.2f}", f"mamba num: {running * 3}",
                      f"mamba usage: {running * 3 / 125:.2f}"]
            if self.spec:
                fields += [f"accept len: {accept:.2f}", f"accept rate: {(accept - 1) / 3:.2f}"]
            fields += ["cuda graph: True", f"gen throughput (token/s): {gen:.2f}", "#queue-req: 0"]
            self.log("Decode batch, " + ", ".join(fields))

    def step_delay(self):
        # Slower steps as concurrency grows (memory-bound decode): 11 ms at 1, ~30 ms at 64.
        return (0.011 + 0.0003 * self.running) / SPEED

    def generate(self, prompt_tokens, max_tokens):
        """Yields token chunks (lists of token ids) with realistic timing; MTP chunks carry several."""
        self.wait_if_updating()
        with self.lock:
            self.running += 1
            self.requests += 1
            self.prompt_tokens += prompt_tokens
        try:
            time.sleep((0.035 + prompt_tokens * 0.00002) / SPEED)  # prefill
            yield [1]
            with self.lock:
                self.tokens_out += 1
            done = 1
            rng = random.Random(prompt_tokens * 31 + max_tokens)
            while done < max_tokens:
                time.sleep(self.step_delay())
                n = 1
                if self.spec:
                    n = min(max_tokens - done, rng.choice((1, 2, 3, 4, 4, 4)))
                    with self.lock:
                        self.accepted += n
                        self.verify_steps += 1
                n = min(n, max_tokens - done)
                done += n
                with self.lock:
                    self.tokens_out += n
                yield [1] * n
        finally:
            with self.lock:
                self.running -= 1

    def server_info(self):
        a = self.args
        accept = (self.accepted / self.verify_steps) if self.verify_steps else None
        return {
            "model_path": self.model_path, "weight_version": self.weight_version, "served_model_name": self.name,
            "tp_size": self.tp,
            "speculative_algorithm": a.speculative_algorithm, "mem_fraction_static": a.mem_fraction_static,
            "context_length": a.context_length, "port": a.port, "launch_command": " ".join(self.argv),
            "max_total_num_tokens": 893440, "status": "ready" if self.ready else "starting",
            "version": os.environ.get("GPUSIM_SGLANG_VERSION") or "0.5.23",
            # issue 37: the resolved multi-node and PD args, as /server_info lists every server arg
            "nnodes": self.nnodes, "node_rank": self.node_rank, "dist_init_addr": a.dist_init_addr,
            "disaggregation_mode": a.disaggregation_mode or "null",
            "disaggregation_bootstrap_port": int(a.disaggregation_bootstrap_port or 8998),
            "internal_states": [{
                "last_gen_throughput": self.last_gen_throughput, "avg_spec_accept_length": accept,
                "effective_max_running_requests_per_dp": 41,
                "memory_usage": {"weight": 58.03, "kvcache": 10.22, "token_capacity": 893440, "graph": 1.58},
            }],
        }

    def metrics(self):
        m = f'model_name="{self.name}",engine_type="unified",tp_rank="0",pp_rank="0",moe_ep_rank="0"'
        accept = (self.accepted / self.verify_steps) if self.verify_steps else 0.0
        running = self.running + self.background_running()
        lines = [
            "# HELP sglang:num_running_reqs The number of running requests.", "# TYPE sglang:num_running_reqs gauge",
            f"sglang:num_running_reqs{{{m}}} {float(running)}",
            "# TYPE sglang:num_queue_reqs gauge", f"sglang:num_queue_reqs{{{m}}} 0.0",
            "# TYPE sglang:num_paused_reqs gauge",
            f"sglang:num_paused_reqs{{{m}}} {float(self.paused_now if self.updating.is_set() else 0)}",
            "# TYPE sglang:gen_throughput gauge", f"sglang:gen_throughput{{{m}}} {self.last_gen_throughput}",
            "# TYPE sglang:token_usage gauge", f"sglang:token_usage{{{m}}} {running * 3 / 125:.2f}",
            "# TYPE sglang:max_total_num_tokens gauge", f"sglang:max_total_num_tokens{{{m}}} 893440.0",
            "# TYPE sglang:spec_accept_length gauge", f"sglang:spec_accept_length{{{m}}} {accept}",
            "# TYPE sglang:generation_tokens_total counter",
            f"sglang:generation_tokens_total{{{m}}} {float(self.tokens_out)}",
            "# TYPE sglang:prompt_tokens_total counter",
            f"sglang:prompt_tokens_total{{{m}}} {float(self.prompt_tokens)}",
            "# TYPE sglang:num_requests_total counter", f"sglang:num_requests_total{{{m}}} {float(self.requests)}",
        ]
        return "\n".join(lines) + "\n"


def _config(model_path):
    try:
        return json.loads((Path(model_path) / "config.json").read_text())
    except (OSError, ValueError, TypeError):
        return None


def _arch(config):
    """What the loader's tensor names and shapes follow (a config differing here fails to load)."""
    if not isinstance(config, dict):
        return None
    tc = {**config, **(config.get("text_config") or {})}
    return json.dumps({k: tc.get(k) for k in ("architectures", "num_hidden_layers", "hidden_size",
                                               "num_attention_heads", "num_key_value_heads", "num_experts",
                                               "vocab_size", "quantization_config")}, sort_keys=True)


def handler_for(server):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *args):
            if server.dummy:  # the dummy health server runs uvicorn at log_level="warning"
                return
            server.log(f'INFO:     {self.client_address[0]}:{self.client_address[1]} - "{self.requestline}" '
                       f"{args[1] if len(args) > 1 else ''}")

        def send_json(self, code, obj):
            body = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):  # noqa: N802
            path = self.path.split("?")[0]
            if server.dummy:  # a node of rank >= 1: SGLang's dummy health server and nothing else
                code = 200 if path in ("/health", "/health_generate", "/ping") else 404
                self.send_response(code)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            if path in ("/health", "/health_generate"):
                if path == "/health_generate" and server.ready:
                    time.sleep(0.05 / SPEED)
                self.send_response(200 if server.ready else 503)
                self.send_header("Content-Length", "0")
                self.end_headers()
            elif path in ("/server_info", "/get_server_info"):
                self.send_json(200, server.server_info())
            elif path == "/v1/models":
                self.send_json(200, {"object": "list", "data": [{
                    "id": server.name, "object": "model", "created": int(server.started), "owned_by": "sglang",
                    "root": server.name, "parent": None, "max_model_len": 262144}]})
            elif path == "/metrics" and server.args.enable_metrics:
                body = server.metrics().encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            else:
                self.send_json(404, {"detail": "Not Found"})

        def do_POST(self):  # noqa: N802
            path = self.path.split("?")[0]
            if server.dummy:
                return self.send_json(404, {"detail": "Not Found"})
            length = int(self.headers.get("Content-Length") or 0)
            try:
                req = json.loads(self.rfile.read(length) or b"{}")
            except ValueError:
                return self.send_json(400, {"object": "error", "message": "invalid JSON", "code": 400})
            if path == "/update_weights_from_disk":
                code, reply = server.update_weights_from_disk(req if isinstance(req, dict) else {})
                return self.send_json(code, reply)
            if path not in ("/v1/completions", "/v1/chat/completions"):
                return self.send_json(404, {"detail": "Not Found"})
            if not server.ready:
                return self.send_json(503, {"object": "error", "message": "server is starting", "code": 503})
            if req.get("model") not in (server.name, None):
                return self.send_json(404, {"object": "error", "message": f"model {req.get('model')!r} not found",
                                            "code": 404})
            chat = path.endswith("chat/completions")
            if chat:
                text = " ".join(str(m.get("content", "")) for m in req.get("messages", []))
            else:
                text = str(req.get("prompt", ""))
            prompt_tokens = max(1, len(text.split()))
            max_tokens = int(req.get("max_tokens") or req.get("max_completion_tokens") or 16)
            rid = f"cmpl-{random.getrandbits(48):012x}"
            if not req.get("stream"):
                n = sum(len(c) for c in server.generate(prompt_tokens, max_tokens))
                return self.send_json(200, {"id": rid, "object": "chat.completion" if chat else "text_completion",
                                            "model": server.name, "choices": [{"index": 0, "finish_reason": "length",
                                            "message" if chat else "text": {"role": "assistant", "content": "x" * n}
                                            if chat else "x" * n}],
                                            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": n,
                                                      "total_tokens": prompt_tokens + n}})
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()

            def send(obj):
                data = f"data: {obj}\n\n".encode()
                self.wfile.write(f"{len(data):X}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()

            total = 0
            try:
                for chunk in server.generate(prompt_tokens, max_tokens):
                    total += len(chunk)
                    piece = " tok" * len(chunk)
                    choice = {"index": 0, "delta": {"content": piece}} if chat else {"index": 0, "text": piece}
                    choice["finish_reason"] = None
                    send(json.dumps({"id": rid, "object": "chat.completion.chunk" if chat else "text_completion",
                                     "model": server.name, "choices": [choice]}))
                last = {"id": rid, "model": server.name, "choices": [
                    {"index": 0, "finish_reason": "length", **({"delta": {}} if chat else {"text": ""})}],
                    "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": total,
                              "total_tokens": prompt_tokens + total}}
                send(json.dumps(last))
                send("[DONE]")
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass

    return Handler


def die_with_parent():
    """The simulator started us: if it dies without stopping us (killed, crashed), so do we."""
    parent = os.getppid()
    try:

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:  # the parent died before the prctl took effect
        os._exit(0)


def main(argv):
    parser = build_parser()
    args = parser.parse_args(argv)  # --help exits here; bad flags fail here, as in SGLang
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    die_with_parent()
    server = Server(args, [sys.executable, "-m", "sglang.launch_server", *argv])
    signal.signal(signal.SIGTERM, lambda *_: server.end("stopped", 0))  # its GPUs are free again
    httpd = SimHttpd(("127.0.0.1", int(args.port or 30000)), handler_for(server))
    httpd.daemon_threads = True
    if os.environ.get("GPUSIM_BOOTED") == "1":
        # A service that has been up for hours: ready now, its boot long scrolled away.
        server.boot_plan = [(0.0, "http"), (0.0, "ready")]
        server.ready = True
        server.start_lifecycle(booted=True)
    else:
        server.start_lifecycle(booted=False)
        threading.Thread(target=server.boot, daemon=True).start()
    threading.Thread(target=server.stats_loop, daemon=True).start()

    def serve_when_up():
        if server.nnodes > 1:  # issue 37: after the rendezvous, whenever that is
            while not server.http_up.wait(1.0):
                pass
            httpd.serve_forever()
            return
        delay = server.started + dict((s, at) for at, s in server.boot_plan)["http"] / SPEED - time.time()
        if delay > 0:
            time.sleep(delay)
        httpd.serve_forever()

    threading.Thread(target=serve_when_up, daemon=True).start()
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main(sys.argv[1:])
