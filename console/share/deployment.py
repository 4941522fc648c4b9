"""Pairing on a deployment (issue 37), with the host pairing's own pieces: one `ShareServer` per node
over that node's HostState (the same protocol, the same Unix socket rules: 0600 in the user's 0700
runtime dir), and a manifest beside them that names the nodes and carries each node's last probe.

    serve:   DeploymentShare(watch, swap).start()  → deploy-NAME-node0.sock, deploy-NAME-node1.sock, …
                                                     deploy-NAME.json (the nodes, the probes; 0600)
    attach:  await attach_deployment("NAME")       → an AttachedWatch: the deployment screen's watch
                                                     built on the attached nodes' mirrored states

The attached console derives its view from the same events (each node's mirror) and the same probes,
so both screens say the same status, nodes, checks and timeline. Nothing on a node can be asked from a
node's socket but what the deployment allows: the deployment's own approval requests are decided
there (the host screen's `a`, or any client's SwapDecide), routed to the DeploymentSwap, with the
share server's two-person rule by identity on top of the swap's own. Unix sockets only: a deployment
is not served over TCP (yet). A browser sees it through `--web` (console/ui/web.py on the serving
machine): each tab's process is `attach --deployment` to these sockets, as this user, the tab's person
its ticket's (an invited person's tab presents their token file).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
from pathlib import Path
from typing import Any

from console.core.control import NoControl
from console.domain.deploy import recording
from console.domain.deploy.checks import Check, run_checks
from console.domain.deploy.probe import NodeProbe
from console.domain.deploy.profile import Deployment
from console.domain.deploy.state import DeploymentView, derive
from console.share import protocol as p
from console.share.client import AttachError, ShareClient, attach
from console.share.server import ShareServer, runtime_dir


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("._") or "deployment"


def manifest_path(name: str, directory: Path | None = None) -> Path:
    return (directory or runtime_dir()) / f"deploy-{_safe(name)}.json"


def node_socket(name: str, key: str, directory: Path | None = None) -> Path:
    return (directory or runtime_dir()) / f"deploy-{_safe(name)}-{_safe(key)}.sock"


class NodeSeat(NoControl):
    """The control a node's share server carries out: the deployment's approvals, nothing else (a
    node of a deployment is swapped from the deployment, never alone from an attached host screen).
    Every other request says why not (NoControl's answers); the pairing requests change nothing
    and refuse nothing, as before."""

    def __init__(self, swap: Any, label: str) -> None:
        super().__init__(f"{label} is part of deployment {swap.deployment.name}: it is swapped from the "
                         "deployment's console")
        self.swap = swap  # the DeploymentSwap: the share server's deny goes to control.swap.deny

    @property
    def who(self) -> str | None:
        return self.swap.who  # type: ignore[no-any-return]

    def swap_preview(self, key: str) -> tuple[str | None, Any]:
        return self.why, None

    def swap_approve(self, request_id: str, who: str) -> str | None:
        return self.swap.approve(request_id, who)  # type: ignore[no-any-return]

    def swap_withdraw(self, request_id: str, who: str) -> str | None:
        return self.swap.withdraw(request_id, who)  # type: ignore[no-any-return]

    def set_note(self, text: str) -> str | None:
        return None

    def hand_over(self, to: int) -> str | None:
        return None

    def ask_drive(self) -> str | None:
        return None

    def accept(self, client: int) -> str | None:
        return None


def deployment_from_manifest(data: Any) -> tuple[Deployment, dict[str, NodeProbe]]:
    """The manifest's deployment and probes; an AttachError (one line) when it is not one."""
    try:
        return recording.deployment_from_manifest(data)
    except recording.ManifestError as exc:
        raise AttachError(str(exc), final=True) from None


class DeploymentShare:
    """Serves a watched deployment: a share server per node, the manifest kept with the probes."""

    def __init__(self, watch: Any, swap: Any, *, directory: Path | None = None,
                 invite: tuple[str, ...] = ()) -> None:
        self.watch = watch
        self.swap = swap
        self.directory = directory
        self.invite = invite  # people issued an invite (the host share's --invite): one token on every node
        self.token_files: dict[str, Path] = {}
        self.tokens: dict[str, str] = {}  # an invited person's token -> their name (a browser tab's person)
        self.url_files: list[Path] = []  # 0600 files of browser addresses (a one-use ticket each)
        self.servers: dict[str, ShareServer] = {}
        self.seats: dict[str, Any] = {}
        self.manifest = manifest_path(watch.deployment.name, directory)

    async def start(self) -> DeploymentShare:
        d = self.watch.deployment
        try:
            for n in d.nodes:
                server = ShareServer(self.watch.states[n.key], NodeSeat(self.swap, n.label), owner=self.swap.who)
                await server.start(unix_path=node_socket(d.name, n.key, self.directory))
                self.servers[n.key] = server
                # the serving console's own seat: its person is this uid, so the same user attached
                # under another name is still the requester (the share server's two-person rule)
                self.seats[n.key] = server.local(self.swap.who or "operator")
        except BaseException:
            await self.close()
            raise
        for name in self.invite:
            self.token_files[name] = self._issue(name)
        self.publish_probes()
        self.watch.on_probes.append(self.publish_probes)
        return self

    def _issue(self, name: str) -> Path:
        """One invite for `name`, the same token on every node's server (who presents it is `name` on
        each), written to a 0600 file beside the manifest: `attach --deployment NAME --token-file`."""
        name = p.clean_name(name)
        servers = list(self.servers.values())
        token = servers[0].invite(name)
        for server in servers[1:]:
            own = server.invite(name)  # the name bound to its person on this server too
            del server.people[own]
            server.people[token] = name  # and the one token that is theirs on every node
        self.tokens[token] = name
        path = self.manifest.with_name(self.manifest.stem + f".{_safe(name)}.token")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(token + "\n")
        return path

    def url_file(self, person: str, url: str) -> Path:
        """A browser address (a one-use ticket) in a 0600 file beside the manifest, its path shown,
        never the address: `deploy-NAME.url` for the serving person, `deploy-NAME.PERSON.url`."""
        suffix = f".{_safe(person)}.url" if person else ".url"
        path = self.manifest.with_name(self.manifest.stem + suffix)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(url + "\n")
        self.url_files.append(path)
        return path

    def publish_probes(self, *_: Any) -> None:
        with contextlib.suppress(OSError):  # a full disk leaves attach with older probes, never the core down
            recording.write_private(self.manifest, recording.manifest(self.watch.deployment,
                                                                     dict(self.watch.probes)))

    async def close(self) -> None:
        with contextlib.suppress(ValueError):
            self.watch.on_probes.remove(self.publish_probes)
        for server in self.servers.values():
            await server.close()
        self.servers.clear()
        with contextlib.suppress(OSError):
            self.manifest.unlink()
        for path in (*self.token_files.values(), *self.url_files):
            with contextlib.suppress(OSError):
                path.unlink()


class AttachedWatch:
    """The deployment screen's watch over attached nodes: their mirrored states, the serving core's
    probes (re-read from its manifest), no transport (nothing is run from here). Built from the
    manifest (the nodes, so the screen can be composed); `start()` attaches to every node."""

    def __init__(self, deployment: Deployment, manifest: Path, probes: dict[str, NodeProbe], *,
                 who: str | None = None, directory: Path | None = None, timeout_s: float = 10.0,
                 token: str = "") -> None:
        self.deployment = deployment
        self.audit_file: Path | None = None  # an attached watch runs nothing: no audit log of its own
        self.token = token  # an invite's token: this person is its invited name on every node
        self.manifest = manifest
        self.probes = probes
        self.who = who
        self.directory = directory
        self.timeout_s = timeout_s
        self.clients: dict[str, ShareClient] = {}
        self.on_probes: list[Any] = []
        self._pumps: list[asyncio.Task[Any]] = []

    @classmethod
    def from_manifest(cls, name: str, *, who: str | None = None, directory: Path | None = None,
                      timeout_s: float = 10.0, token: str = "") -> AttachedWatch:
        """The served deployment's manifest; an AttachError (one line) when it is not served."""
        manifest = manifest_path(name, directory)
        try:
            data = json.loads(manifest.read_text())
        except FileNotFoundError:
            raise AttachError(f"no deployment {name!r} is served here (no {manifest})") from None
        except (OSError, ValueError) as exc:
            raise AttachError(f"{manifest}: {exc}") from None
        deployment, probes = deployment_from_manifest(data)
        return cls(deployment, manifest, probes, who=who, directory=directory, timeout_s=timeout_s, token=token)

    @property
    def states(self) -> dict[str, Any]:
        return {k: c.state for k, c in self.clients.items()}

    def transport(self, key: str) -> None:
        return None

    async def start(self) -> None:
        """Attach to every node (as an observer: the serving console drives), then follow them."""
        if self.clients:
            return
        try:
            for n in self.deployment.nodes:
                self.clients[n.key] = await attach(node_socket(self.deployment.name, n.key, self.directory),
                                                   name=self.who, token=self.token, timeout_s=self.timeout_s,
                                                   observe=True)
        except BaseException:
            await self.close()
            raise
        self._pumps = [asyncio.ensure_future(c.pump()) for c in self.clients.values()]

    async def approve(self, request_id: str) -> str | None:
        """Approve the deployment swap's request from here (the core checks who this is)."""
        client = next(iter(self.clients.values()), None)
        if client is None:
            return "not attached"
        reply = await client.request(p.SwapDecide, request=request_id, decision="approve")
        return reply.error

    async def probe_all(self) -> dict[str, NodeProbe]:
        """The serving core's last probes (this console runs nothing on the nodes)."""
        with contextlib.suppress(OSError, ValueError, AttachError):
            _, self.probes = deployment_from_manifest(json.loads(self.manifest.read_text()))
        return dict(self.probes)

    def view(self, now_s: float | None = None) -> DeploymentView:
        return derive(self.deployment, self.states, self.probes, now_s)

    def checks(self) -> tuple[Check, ...]:
        return run_checks(self.deployment, self.states, self.probes)

    async def close(self) -> None:
        for task in self._pumps:
            task.cancel()
        for task in self._pumps:
            with contextlib.suppress(BaseException):
                await task
        for c in self.clients.values():
            await c.close()
        self.clients.clear()


async def attach_deployment(name: str, *, who: str | None = None, directory: Path | None = None,
                            timeout_s: float = 10.0) -> AttachedWatch:
    """Attach to every node of a served deployment; an AttachError (one line) when it is not served."""
    watch = AttachedWatch.from_manifest(name, who=who, directory=directory, timeout_s=timeout_s)
    await watch.start()
    return watch
