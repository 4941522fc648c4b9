"""The swap's actions when SGLang runs in a container (issue 26), as data with their exact commands,
like console/domain/swap/actions.py for units: check or pull the image, create the new container from
its compose file, stop the old one (then wait for its GPU memory to drain), start the new one,
roll back by starting the old one again.

Names and image references are checked against Docker's own rules, quoted, and follow `--`
(Docker's CLI parses options with pflag, which ends options there); every command runs under the
host's `timeout -k`. A plain container that does not exist yet is not created from a guessed
`docker run` line: the plan names it as the operator's step (its environment can hold secrets that
no command line shown on a screen should carry).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from console.domain.swap.actions import Action, ActionError, RemoteCommand, bounded, check_path

# Docker: container names [a-zA-Z0-9][a-zA-Z0-9_.-]+ (daemon/names.go's validContainerNamePattern)
CONTAINER_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
# A reference: [registry[:port]/]name[/name...][:tag][@sha256:hex] (distribution/reference's grammar, narrowed)
IMAGE_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*(?::[0-9]+)?(?:/[a-z0-9][a-z0-9._-]*)*"
                      r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[0-9a-f]{64})?$")
SERVICE_RE = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,127}$")  # compose service names


def check_container(name: str | None) -> str:
    if not name or not CONTAINER_RE.match(name):
        raise ActionError(f"not a container name: {name!r}")
    return name


def check_image(ref: str | None) -> str:
    if not ref or len(ref) > 512 or not IMAGE_RE.match(ref):
        raise ActionError(f"not an image reference: {ref!r}")
    return ref


def check_service(name: str | None) -> str:
    if not name or not SERVICE_RE.match(name):
        raise ActionError(f"not a compose service name: {name!r}")
    return name


def check_image_present(image: str) -> Action:
    image = check_image(image)
    return Action("check_image", f"check that {image} is on the host", (
        RemoteCommand(bounded(["docker", "image", "inspect", "--format", "{{.Id}}", "--", image], 30), 40,
                      "the image is on the host"),))


def pull_image(image: str) -> Action:
    image = check_image(image)
    return Action("pull_image", f"pull {image}", (
        RemoteCommand(bounded(["docker", "pull", "--", image], 1800), 1810, "pull the new image"),),
        waits_for="the image is on the host")


def create_from_compose(compose_file: str, service: str) -> Action:
    path, service = check_path(compose_file, "the compose file"), check_service(service)
    return Action("create_new", f"create the container of {service} from {path}", (
        RemoteCommand(bounded(["docker", "compose", "-f", path, "create", "--no-recreate", "--", service], 300), 310,
                      "create the new container (not started)"),))


COMPOSE_HASH_LABEL = "com.docker.compose.config-hash"


def compose_current(compose_file: str, service: str, name: str) -> Action:
    """Is the service's container the file's launch? `docker compose create --no-recreate` leaves a
    container created from an earlier version of the file as it was (and says nothing): Compose's own
    hash of the service as the file says it now, then the hash Compose labelled the container with."""
    path, service, name = check_path(compose_file, "the compose file"), check_service(service), check_container(name)
    script = (bounded(["docker", "compose", "-f", path, "config", "--hash", service], 60) + " && "
              + bounded(["docker", "inspect", "--type", "container", "--format",
                         f'{{{{index .Config.Labels "{COMPOSE_HASH_LABEL}"}}}}', "--", name], 20))
    return Action("compose_current", f"check that {name} is {service} as {path} says it now", (
        RemoteCommand(script, 90, "Compose's hash of the service in the file, and the container's"),))


def parse_compose_current(text: str, service: str) -> tuple[str, str] | None:
    """(the file's hash of the service, the container's label) from `compose_current`'s output; None
    when it is not the two lines asked for."""
    lines = [x.strip() for x in text.strip().splitlines() if x.strip()]
    if len(lines) != 2:
        return None
    named, _, file_hash = lines[0].partition(" ")
    if named != service or not re.fullmatch(r"[0-9a-f]{16,128}", file_hash.strip()) \
            or not re.fullmatch(r"[0-9a-f]{0,128}", lines[1]):
        return None
    return file_hash.strip(), lines[1]


DEFAULT_GRACE_S = 60  # SGLang's shutdown with its GPUs' memory released, when the container sets none


@dataclass(frozen=True, slots=True)
class Grace:
    """How long `docker stop` waits between SIGTERM and SIGKILL, and whose figure it is."""

    seconds: int
    said: str


def stop_grace(spec: Any) -> Grace:
    """The container's own StopTimeout (`docker run --stop-timeout`, Compose's stop_grace_period),
    which a plain `docker stop` would use; the console's 60 s when it sets none (Docker's own default,
    10 s, is short for a server releasing 4 GPUs' memory), said so in the command's description."""
    own = getattr(spec, "stop_timeout_s", None)
    if isinstance(own, int) and not isinstance(own, bool) and own >= 0:
        return Grace(own, f"its StopTimeout, {own} s")
    return Grace(DEFAULT_GRACE_S, f"{DEFAULT_GRACE_S} s: the container sets no StopTimeout (Docker's own default "
                                  "is 10 s)")


def stop_command(name: str, grace: Grace, what: str = "stop the container") -> RemoteCommand:
    """`docker stop -t GRACE -- NAME`, bounded on the host 30 s past the grace."""
    name = check_container(name)
    return RemoteCommand(bounded(["docker", "stop", "-t", str(int(grace.seconds)), "--", name], grace.seconds + 30),
                         grace.seconds + 40, f"{what} (SIGTERM, then SIGKILL after {grace.said})")


def stop_container(name: str, *, key: str = "stop_old", approval: bool = False,
                   grace: Grace | None = None) -> Action:
    name, grace = check_container(name), grace or stop_grace(None)
    return Action(key, f"stop {name}", (stop_command(name, grace),),
                  waits_for=f"GPU memory drained (SIGKILL after {grace.said})", needs_approval=approval)


def start_container(name: str, *, key: str = "start_new", approval: bool = False) -> Action:
    name = check_container(name)
    return Action(key, f"start {name}", (
        RemoteCommand(bounded(["docker", "start", "--", name], 60), 70, "start the container"),),
        waits_for="the server is ready", needs_approval=approval)


def rollback(new: str, old: str, *, approval: bool = False, grace: Grace | None = None) -> Action:
    new, old = check_container(new), check_container(old)
    return Action("rollback", f"roll back: stop {new}, start {old}", (
        stop_command(new, grace or stop_grace(None), "stop the new container"),
        RemoteCommand(bounded(["docker", "start", "--", old], 60), 70, "start the old container again"),
    ), waits_for="the old server is ready", needs_approval=approval)


def container_state_check(name: str) -> str:
    """One line: status, running, exit code, restarts, OOM-killed (`docker inspect -f`)."""
    name = check_container(name)
    return bounded(["docker", "inspect", "--type", "container", "--format",
                    "{{.State.Status}} {{.State.Running}} {{.State.ExitCode}} {{.RestartCount}} {{.State.OOMKilled}}",
                    "--", name], 20)


def parse_container_state(text: str) -> dict[str, str]:
    parts = text.strip().split()
    # Docker's statuses are lowercase words and its numbers ASCII digits: `²` is a digit to
    # str.isdigit and an escape sequence is not a status (issue 34: found by the fuzz target).
    if (len(parts) != 5 or not re.fullmatch(r"[a-z]{1,20}", parts[0]) or parts[1] not in ("true", "false")
            or parts[4] not in ("true", "false") or not re.fullmatch(r"-?[0-9]{1,10}", parts[2])
            or not re.fullmatch(r"[0-9]{1,10}", parts[3])):
        return {}  # not the line asked for (the daemon's error, a missing container)
    return dict(zip(("status", "running", "exit_code", "restarts", "oom_killed"), parts, strict=True))
