"""Prometheus labels are data, not markup and not SSH targets (issue 21, item 4): `[/]` crashed the
fleet screen (MarkupError, exit 0); `[bold red]` and `[link=…]` labels drew as styling and links;
a label starting with `?` collided with the console's own rows; Enter opened SSH to whatever a
label said."""

from __future__ import annotations

from rich.text import Text

from console.core.state import HostState, Notice
from console.domain.fleet.prom import NO_HOST, PrometheusFleet, _Labels, host_of
from console.domain.fleet.rows import cell_text, fleet_row, format_cells, host_label, ssh_target

LABELS = ["[/]", "[bold red]RED[/bold red]", "[link=http://evil.example/]click[/link]", "[", "x[/]y",
          "\\[escaped]", "[@click=app.quit]q[/]", "gpu-01"]


async def test_hostile_labels_render_as_their_text_and_crash_nothing() -> None:
    from console.ui.app import FleetApp

    states = [HostState(label, label=label) for label in LABELS]
    app = FleetApp(states, host_for=lambda key: None)
    async with app.run_test(size=(160, 40)) as pilot:
        await pilot.pause()
        screen = app.fleet_screen
        table = screen.table
        def drawn(cell: object) -> Text:  # as DataTable draws a cell: a str is markup
            return cell if isinstance(cell, Text) else Text.from_markup(str(cell))

        shown = sorted(drawn(table.get_row(label)[0]).plain for label in LABELS)
        assert shown == sorted(LABELS)
        for label in LABELS:
            cell = drawn(table.get_row(label)[0])
            assert not cell.spans and not cell.style, (label, cell)  # no style came from the label
        states[0].apply(Notice(states[0].host, "[/]", "[link=http://evil.example/]x[/link]", "warning"))
        await pilot.pause(0.5)
    assert app.return_code in (None, 0)


def test_cells_are_text_never_markup() -> None:
    state = HostState("[bold]h[/bold]", label="[bold]h[/bold]")
    row = fleet_row(state)
    for key, text in format_cells(row).items():
        cell = cell_text(row, key, text)
        assert (cell if isinstance(cell, Text) else Text.from_markup(cell)).plain == text


def test_a_label_never_collides_with_the_consoles_own_rows_nor_holds_escapes() -> None:
    assert host_label(NO_HOST) == "no-host-label" and host_label("??x") == "x" and host_label("?") is None
    assert host_label("gpu\x1b]0;T\x07-01") == "gpu-01"
    assert host_of(_Labels(Hostname="?no-host-label")) != NO_HOST
    assert host_of(_Labels(instance="?x:9400")) == "x"


def test_only_a_host_name_is_an_ssh_target() -> None:
    for bad in ("-oProxyCommand=touch /tmp/x", "a b", "[x]", "x;y", "", "host/../x", "ünï"):
        assert ssh_target(bad) is None, bad
    for good in ("gpu-01", "gpu1.dc.example", "10.0.0.7", "::1"):
        assert ssh_target(good) == good


async def test_enter_on_a_label_without_a_profile_opens_no_ssh_without_the_operators_say() -> None:
    fleet = PrometheusFleet("http://127.0.0.1:9")
    for key in ("gpu-01", "-oProxyCommand=x"):
        fleet.states[key] = HostState(key, label=key)
    state, control, note = fleet.drill_down("gpu-01")  # type: ignore[misc]
    assert control is None and "--ssh-to-labels" in (note or "") and not fleet._ssh
    fleet.ssh_to_labels = True
    state, control, note = fleet.drill_down("-oProxyCommand=x")  # type: ignore[misc]
    assert control is None and "not a host name" in (note or "") and not fleet._ssh


def test_model_and_uuid_labels_are_cleaned_of_escapes() -> None:
    from console.domain.fleet.prom import _Sample, group_samples

    metric = _Labels(name="DCGM_FI_DEV_FB_USED", gpu="0", UUID="GPU-1\x1b]0;T\x07", modelName="H200\x1b]52;c;eA==\x07",
                     Hostname="gpu-01")
    grouped = group_samples([_Sample(metric, (1.0, "5"))], [])
    slot = grouped["gpu-01"].gpus["0"]
    assert slot["uuid"] == "GPU-1" and slot["model"] == "H200"


async def test_a_host_label_with_line_breaks_is_one_host_on_the_fleet_screen() -> None:
    """A `Hostname` label `a\\nb\\rc` (issue 34, item 9): the GPU series were keyed by the raw label,
    the server's by the cleaned one, and the fleet screen crashed (KeyError)."""
    from console.ui.app import FleetApp
    from console.domain.fleet.prom import _Sample, group_samples

    raw = "a\nb\rc"
    dcgm = [_Sample(_Labels(name="DCGM_FI_DEV_FB_USED", gpu="0", Hostname=raw), (1.0, "5"))]
    sglang = [_Sample(_Labels(name="sglang:num_running_reqs", Hostname=raw), (1.0, "2"))]
    grouped = group_samples(dcgm, sglang)
    assert list(grouped) == ["a b c"]
    fleet = PrometheusFleet("http://127.0.0.1:9")
    fleet.apply(grouped, 1.0)
    assert list(fleet.states) == ["a b c"]
    app = FleetApp(list(fleet.states.values()), host_for=lambda key: None)
    async with app.run_test(size=(160, 40)) as pilot:
        await pilot.pause()
        assert app.fleet_screen.table.get_row("a b c")[0]
        await pilot.press("down", "up")
        await pilot.pause()
    assert app.return_code in (None, 0)
