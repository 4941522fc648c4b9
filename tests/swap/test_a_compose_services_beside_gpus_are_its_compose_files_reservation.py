"""The beside plan on a compose service names its GPUs as the compose file gives them (the service's
`deploy.resources.reservations`, which Compose passes to Docker), never a `docker run --gpus` flag that no
command of the swap runs: the paths step's plan, and the refusal of a new container created for other GPUs.
(tests/real/test_compose_beside_report_says_what_the_host_did.py reads the same words in a lived report.)"""

from __future__ import annotations

from types import SimpleNamespace

from console.domain.swap import container_fastpath as cfp
from console.domain.swap import paths as P
from tests.kit.container_paths import FastCtl, spec

RESERVED = 'device_ids ["4", "5", "6", "7"] of the compose service\'s deploy.resources.reservations'


def _gpus(n: int = 8) -> SimpleNamespace:
    return SimpleNamespace(gpus=[SimpleNamespace(index=i, lost_at_s=None, error=None, processes=(),
                                                 memory_used_mib=0 if i >= 4 else 80_000, memory_total_mib=97_887)
                                 for i in range(n)])


def _fit() -> P.FitResult:
    return SimpleNamespace(fits=True, verdict="fits", binding_constraint="", weights_gib=58.0,
                           max_total_tokens=1_000_000)  # type: ignore[return-value]


def _inputs() -> SimpleNamespace:
    return SimpleNamespace(tp=4, pp=1)


def test_the_beside_plan_of_a_compose_service_names_its_compose_files_gpu_reservation() -> None:
    option = P.beside_option(_inputs(), _gpus(), old_port=30000, fit=_fit(), container=True,  # type: ignore[arg-type]
                             compose=True)
    assert option.possible and option.gpus == (4, 5, 6, 7), option
    assert option.details[0].startswith(f"boots on GPUs 4,5,6,7 ({RESERVED}), port 30001"), option.details
    assert "--gpus" not in " ".join(option.details)
    # a plain container's plan still names the flag its launch carries
    plain = P.beside_option(_inputs(), _gpus(), old_port=30000, fit=_fit(), container=True)  # type: ignore[arg-type]
    assert "(--gpus '\"device=4,5,6,7\"')" in plain.details[0], plain.details


def test_a_compose_services_container_created_for_other_gpus_is_refused_in_its_compose_files_words() -> None:
    ctl = FastCtl(spec("sglang-old", "/shared/models"), spec("sglang-new", "/shared/models"), "/shared/models/N")
    ctl.profile.compose = "/srv/sglang/compose.yaml"
    beside = P.PathOption("beside", True, 0.0, "free GPUs", gpus=(4, 5, 6, 7), port=30000)
    why = cfp.beside_misfit(ctl, beside)  # type: ignore[arg-type]
    assert why is not None and f"its GPUs are device=0,1,2,3, not 4,5,6,7 ({RESERVED})" in why, why
    assert "--gpus" not in why
