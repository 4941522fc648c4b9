"""The swap's plan when SGLang runs in a container (issue 26, item 5), when the profile names
containers (`container` / `compare_container`, or `compose` + `compose_service`): the names of the old
and new containers, each step's preview (its exact docker commands), and the reading of a container
(`docker inspect`). The steps' runs are console/domain/swap/container_steps.py's.

The same gate, approvals, audit, downtime clock and report as for units: only the commands and the
readings that decide a step differ. Install becomes "check the new container's image (pull it when
missing), create the container from the compose file"; stop is `docker stop`, then the GPUs' memory
must drain; start is `docker start`, then the server must be ready *and* the container running (the
server watcher has no unit to ask: `docker inspect` says whether the container is up, exited, with
what code, OOM-killed, restarting in a loop); rollback stops the new container and starts the old one.

Every name and reference is checked by console/domain/swap/container_actions.py before any command is built:
a hostile name in the profile or from the host never reaches a shell.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from console.domain.swap import actions as act
from console.domain.swap import container_actions as ca
from console.domain.swap import container_fastpath
from console.domain.swap.container_steps import INSTALL_TITLE
from console.domain.swap.errors import StepFailed
from console.domain.swap.executor_api import Executor
from console.host.parsers.docker import COMPOSE_SERVICE
from console.host.transport.errors import TransportError

KEYS = ("install", "stop_old", "start_new", "rollback")


def uses_containers(profile: Any) -> bool:
    return bool(getattr(profile, "container", None) or getattr(profile, "compose", None))


def _image_of(side: Any) -> str | None:
    """The image a service side runs: the `image:` line of its text (console.domain.analysis.container_diff's
    `container_text`, the one place the side's launch is written out)."""
    text = getattr(side, "text", None) or ""
    for line in text.splitlines():
        if line.startswith("image: "):
            return line[len("image: "):].strip()
    return None


class ContainerPlan:
    """The container half of the swap; `ctl` is the Executor (its run/audit/drain/approval)."""

    def __init__(self, ctl: Executor) -> None:
        self.ctl = ctl

    # -- what the plan is -------------------------------------------------------------------
    @property
    def active(self) -> bool:
        return uses_containers(self.ctl.profile)

    @property
    def old_name(self) -> str | None:
        return getattr(self.ctl.profile, "compare_container", None)

    @property
    def new_name(self) -> str | None:
        """The new container: the profile's `container`; from a compose file, the one the service
        reading found (its `container_name`, the container Compose's labels name, or
        PROJECT-SERVICE-1 as Compose will name it)."""
        p = self.ctl.profile
        if getattr(p, "container", None):
            return str(p.container)
        report = self.ctl.state.data("service")
        if report is not None and report.new is not None and report.new.error is None and report.new.name:
            return str(report.new.name)
        return None

    def announce(self) -> None:
        """The install step says what it is here (its title is the unit's in the plan's table)."""
        step = self.ctl.state.swap.steps.get("install")
        if step is not None and step.state == "pending" and step.title != INSTALL_TITLE:
            self.ctl._set("install", title=INSTALL_TITLE)

    def compose_names(self) -> tuple[str | None, str | None, str | None]:
        """(the compose file, the old container's service, the new one's) as the swap's setup says
        them; a service read from the container's Compose label, the profile's where not read yet."""
        p = self.ctl.profile
        file = getattr(p, "compose", None)

        def service(side: str) -> str | None:
            found = container_fastpath.spec(self.ctl, side)
            labels = dict(found.labels) if found is not None else {}
            return labels.get(COMPOSE_SERVICE)

        new = service("new") or (getattr(p, "compose_service", None) if file else None)
        return (str(file) if file else None), service("old"), new

    def new_image(self) -> str:
        report = self.ctl.state.data("service")
        side = report.new if report is not None else None
        if side is None:
            raise act.ActionError("the new container's image is not known yet (wait for the service pane)")
        if side.error is not None:
            raise act.ActionError(f"the new container cannot be read: {side.error}")
        image = _image_of(side)
        if not image:
            raise act.ActionError("the new container names no image")
        return ca.check_image(image)

    # -- the controller's hooks -------------------------------------------------------------
    def build(self, key: str) -> list[act.Action]:
        p = self.ctl.profile
        approval = bool(getattr(p, "require_approval", False))
        if key == "install":
            image = self.new_image()
            check = ca.check_image_present(image)
            pull = ca.pull_image(image)
            pull = replace(pull, title=pull.title + " (only if the check finds it missing)")
            out = [check, pull]
            if getattr(p, "compose", None):
                out.append(ca.create_from_compose(p.compose, ca.check_service(p.compose_service)))
                out.append(ca.compose_current(p.compose, p.compose_service, ca.check_container(self.new_name)))
            else:
                new = ca.check_container(self.new_name)
                out.append(act.Action("new_container", f"the new container {new} exists, not running", (
                    act.RemoteCommand(ca.container_state_check(new), 30, "read the new container's state"),)))
            return out
        if key == "stop_old":
            return [ca.stop_container(ca.check_container(self.old_name), approval=approval,
                                      grace=ca.stop_grace(container_fastpath.spec(self.ctl, "old")))]
        if key == "start_new":
            return [ca.start_container(ca.check_container(self.new_name), approval=approval)]
        if key == "rollback" and (fast := container_fastpath.rollback_action(self.ctl, approval=approval)):
            return [fast]  # in place or beside: the old container never stopped
        if key == "rollback":
            return [ca.rollback(ca.check_container(self.new_name), ca.check_container(self.old_name),
                                approval=approval, grace=ca.stop_grace(container_fastpath.spec(self.ctl, "new")))]
        raise act.ActionError(f"no such action: {key}")

    # -- reading a container ----------------------------------------------------------------
    async def state_of(self, name: str) -> dict[str, str]:
        """`docker inspect` of one container: status, running, exit_code, restarts, oom_killed;
        {} when there is no such container (or the daemon did not answer)."""
        ctl = self.ctl
        script = ca.container_state_check(name)
        for _ in range(3):
            try:
                r = await ctl.session.transport.run(script, timeout=30)
                return ca.parse_container_state(r.text)
            except TransportError:
                await ctl._reconnected(ctl.busy or "stop_old", "connection lost while reading the container")
        raise StepFailed(f"cannot read the state of {name}")

    # -- the steps --------------------------------------------------------------------------

    # -- following a container to ready -----------------------------------------------------




__all__ = ["ContainerPlan", "INSTALL_TITLE", "KEYS", "uses_containers"]
