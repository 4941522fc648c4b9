"""The deployment on one screen (issue 37): its one status, its nodes (each with its GPUs as the
host screen's GPU pane draws them, console/ui/panes/gpu.py's format_gpu_status), the faults and the
checks, and the one timeline labelled by node and rank. It reads a DeploymentWatch (the nodes'
HostStates and probes) and redraws at most once a second, only what changed; it holds no data."""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Static

from console.domain.deploy.swap import format_report
from console.share.deployment import DeploymentShare
from console.share.server import ShareError
from console.domain.deploy.text import format_checks, format_faults, format_nodes, format_status_line, format_timeline
from console.ui.panes.gpu import format_gpu_status
from console.ui.web import WebShare, serve_deployment

REFRESH_S = 1.0
STATUS_STYLE = {"ready": "bold green", "starting": "cyan", "waiting": "bold yellow", "failed": "bold red",
                "unknown": "dim"}


class DeploymentScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("p", "probe", "Probe nodes"),
        Binding("S", "swap_preview", "Swap every node"),
        Binding("R", "rollback_preview", "Roll back every node"),
        Binding("D", "side_preview('decode')", "Swap decode alone"),
        Binding("P", "side_preview('prefill')", "Swap prefill alone"),
        Binding("a", "approve", "Approve a request"),
        Binding("y", "confirm", "Confirm", show=False),
        Binding("n", "cancel", "Cancel", show=False),
        Binding("q", "app.quit", "Quit"),
    ]
    DEFAULT_CSS = """
    DeploymentScreen #deploy-status { height: auto; padding: 0 1; background: $boost; }
    DeploymentScreen #deploy-nodes { height: auto; padding: 0 1; }
    DeploymentScreen #deploy-gpus { height: auto; max-height: 14; }
    DeploymentScreen .deploy-gpu { width: 1fr; height: auto; border: round $primary-lighten-2; padding: 0 1; }
    DeploymentScreen #deploy-faults, DeploymentScreen #deploy-checks { height: auto; padding: 0 1; }
    DeploymentScreen #deploy-swap { height: auto; max-height: 16; padding: 0 1; border: round $warning; display: none; }
    DeploymentScreen #deploy-swap.-shown { display: block; }
    DeploymentScreen #deploy-timeline { height: 1fr; border: round $primary-lighten-2; padding: 0 1; }
    """

    def __init__(self, watch: Any, swap: Any = None, *, start_watch: bool = False, share: bool = False,
                 approver: Any = None, report: Any = None, invite: tuple[str, ...] = (),
                 web: tuple[str, int] | None = None) -> None:
        super().__init__()
        self.watch = watch
        self.web_at = web  # with share: served to browsers too ([HOST:]PORT), each tab an attach --deployment
        self.web: WebShare | None = None
        self.share_it = share  # serve the deployment to `gpuconsole attach --deployment NAME` (pairing)
        self.invite = invite  # with share: people issued an invite of their own (a 0600 token file each)
        self.shared: Any = None  # the DeploymentShare once serving
        # how this console approves a pending request: the swap's own (this person; another must
        # approve) or, attached, a request to the serving core (it checks who this is)
        self.approver = approver
        self._answer = ""  # this console's last approval answer, kept beside the pending request
        self.report = report  # a replay: () -> the last swap report written by then (None: none yet)
        self.start_watch = start_watch  # the console's first screen starts the watch (its nodes' sessions)
        self.swap = swap  # console/domain/deploy/swap.py's DeploymentSwap (None: this screen only watches)
        self._pending: str | None = None  # the confirmation the preview asks (the swap's ask id), waiting for y
        self._side: str | None = None  # with it: one side of a PD pair alone ("prefill" or "decode")
        self._kind = "swap"  # with it: "swap" or "rollback"
        self._shown: dict[str, str] = {}

    def compose(self) -> ComposeResult:
        yield Static(id="deploy-status")
        yield Static(id="deploy-nodes")
        with Horizontal(id="deploy-gpus"):
            for node in self.watch.deployment.nodes:
                if node.role != "router":
                    pane = Static(classes="deploy-gpu", id=f"deploy-gpu-{node.key}")
                    pane.border_title = f"{node.label} · GPUs"
                    yield pane
        yield Static(id="deploy-faults")
        yield Static(id="deploy-checks")
        yield Static(id="deploy-swap")
        with VerticalScroll(id="deploy-timeline"):
            yield Static(id="deploy-timeline-text")
        yield Footer()

    async def on_mount(self) -> None:
        if self.start_watch:
            await self.watch.start()
        if self.share_it and self.swap is not None:
            try:
                self.shared = await DeploymentShare(self.watch, self.swap, invite=self.invite).start()
            except (ShareError, OSError) as exc:
                self.notify(str(exc), severity="error")
            else:
                name = self.watch.deployment.name
                self.notify(f"shared: gpuconsole attach --deployment {name}")
                for person, path in self.shared.token_files.items():  # the path only, never the token
                    self.notify(f"invite for {person} in {path} (0600; hand it over): gpuconsole attach "
                                f"--deployment {name} --token-file {path}", timeout=60)
                if self.web_at is not None:
                    await self._serve_web()
        self.query_one("#deploy-timeline").border_title = "one timeline · console clock (UTC) · node and rank"
        self.refresh_view()
        self.set_interval(REFRESH_S, self.refresh_view)

    def _put(self, widget_id: str, text: Text) -> None:
        plain = text.plain
        if self._shown.get(widget_id) == plain:
            return  # an equal text costs nothing: Static.update repaints even when equal
        self._shown[widget_id] = plain
        self.query_one(f"#{widget_id}", Static).update(text)

    def refresh_view(self) -> None:
        view = self.watch.view()
        width = max(40, self.size.width - 4)
        self._put("deploy-status", Text(format_status_line(view, width), style=STATUS_STYLE.get(view.status.status, "")))
        self._put("deploy-nodes", Text("\n".join(format_nodes(view, width))))
        states = self.watch.states
        panes = [n for n in self.watch.deployment.nodes if n.role != "router"]
        for node in panes:
            state = states.get(node.key)
            reading = state.reading("gpu") if state is not None else None
            pane_w = max(30, width // max(1, len(panes)) - 4)
            self._put(f"deploy-gpu-{node.key}", format_gpu_status(reading, pane_w, 10))
        self._put("deploy-faults", Text("\n".join(format_faults(view, width)),
                                        style="red" if view.faults else "dim"))
        self._put("deploy-checks", Text("\n".join(format_checks(self.watch.checks(), width))))
        self._put("deploy-timeline-text", Text("\n".join(format_timeline(view.timeline, 200, width))))
        if self.report is not None and (text := self.report()) is not None:
            self._put("deploy-swap", Text(text))
            self.query_one("#deploy-swap", Static).set_class(True, "-shown")
        pending = self._requests()
        if pending:
            req = pending[0]
            asked = (f"{req.requested_by} asks for {req.action}: waiting for another person's approval "
                     "(a approves, from another person's console)")
            self._put("deploy-swap", Text("\n".join([asked, *req.commands, *([self._answer] if self._answer else [])])))
            self.query_one("#deploy-swap", Static).set_class(True, "-shown")

    def _swap_box(self, text: str) -> None:
        box = self.query_one("#deploy-swap", Static)
        box.set_class(bool(text), "-shown")
        self._shown["deploy-swap"] = text
        box.update(Text(text))

    def _preview(self, kind: str, side: str | None = None) -> None:
        self._pending = self._side = None
        if self.swap is None:
            return self._swap_box("this screen only watches")
        if self.swap.read_only:
            return self._swap_box("read-only: this session changes nothing on the hosts")
        if self.swap.busy:
            return self._swap_box("a swap is running: one at a time")
        if side is not None and (why := self.swap.side_refusal(side, kind)) is not None:
            return self._swap_box(f"{side} alone is not allowed now: {why}")
        try:
            pid, lines = self.swap.ask(kind, side)
        except ValueError as exc:
            return self._swap_box(str(exc))
        self._pending, self._side, self._kind = pid, side, kind
        self._swap_box("\n".join(lines + ["", "y: run these commands on the hosts · n: cancel"]))

    def action_side_preview(self, side: str) -> None:
        self._preview("swap", side)

    def action_swap_preview(self) -> None:
        self._preview("swap")

    def action_rollback_preview(self) -> None:
        self._preview("rollback")

    def action_cancel(self) -> None:
        self._pending = None
        self._swap_box("")

    def action_confirm(self) -> None:
        if self._pending is None or self.swap is None:
            return
        pid, kind, side, self._pending, self._side = self._pending, self._kind, self._side, None, None
        self._swap_box(f"{kind} running…" if side is None else f"{kind} of the {side} side running…")
        self.run_worker(self._run_swap(pid), group="deploy-swap", exclusive=True, exit_on_error=False)

    async def _run_swap(self, preview_id: str) -> None:
        run = await self.swap.confirm(preview_id)  # the confirmation runs once
        self._swap_box(format_report(run, self.watch.deployment))

    def _requests(self) -> list[Any]:
        seen: dict[str, Any] = {}
        for state in self.watch.states.values():
            for req in state.swap.pending_approvals:
                seen.setdefault(req.request_id, req)
        return list(seen.values())

    async def action_approve(self) -> None:
        pending = self._requests()
        if not pending:
            return self._swap_box("no request waits for an approval")
        req = pending[0]
        if self.approver is not None:
            why = await self.approver(req.request_id)
        elif self.swap is not None:
            why = self.swap.approve(req.request_id, self.swap.who)
        else:
            why = "this screen only watches"
        self._answer = (f"approval of {req.action} (request {req.request_id}, asked by {req.requested_by}): "
                        + (why or "granted"))
        self._swap_box(self._answer)

    async def _serve_web(self) -> None:
        """The deployment to browsers: each tab's process attaches to the nodes' sockets as the person
        its one-use address was issued to (the addresses in 0600 files, their paths shown)."""
        assert self.web_at is not None and self.shared is not None
        try:
            self.web, files = await serve_deployment(self.shared, *self.web_at, owner=self.swap.who)
        except OSError as exc:
            self.notify(f"browsers: not served: {exc}", severity="error")
            return
        for person, path in files:  # the path only, never the address (a one-use ticket)
            self.notify(f"browser address {'for ' + person if person else 'of yours'} in {path} (0600; "
                        "it works once)", timeout=60)

    async def close_share(self) -> None:
        if self.web is not None:
            await self.web.close()
            self.web = None
        if self.shared is not None:
            await self.shared.close()
            self.shared = None

    async def action_probe(self) -> None:
        await self.watch.probe_all()
        self.refresh_view()
