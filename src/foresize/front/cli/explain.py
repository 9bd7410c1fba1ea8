"""`foresize explain NAMESPACE/TARGET [CONTAINER]`: the chain from usage to each request.

Reads the steps the recommendation recorded as it computed the suggestion
(`status.explanation`, `foresize.core.recommend.explain`) from a live cluster's
AIScaleTarget (kubeconfig, or `--server` for `kubectl proxy`) or from a simulator run
(`--scenario NAME|FILE --at DURATION`, the same pass the operator runs). Nothing is
recomputed here: what is printed is what was written.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import typer

from foresize.core.errors import ForesizeError


def split_target(text: str) -> tuple[str, str]:
    """`NAMESPACE/TARGET` -> (namespace, name); an error names the argument."""
    ns, sep, name = text.partition("/")
    if not sep or not ns or not name or "/" in name:
        raise ForesizeError(f"NAMESPACE/TARGET: expected namespace/name, got {text!r}")
    return ns, name


def simulated_status(
    scenario: str,
    at: float,
    namespace: str,
    name: str,
    seed: int | None = None,
    policy: str = "foresize",
) -> dict[str, Any]:
    """The target's status after `at` seconds of `scenario` under `policy` (a Foresize
    policy of `foresize simulate`: foresize, foresize:MODE, foresize-window, ...)."""
    from foresize.shells.sim.runner import build, run_for
    from foresize.shells.sim.scenario import check_run_size, load_scenario

    sc = load_scenario(scenario)
    check_run_size(sc, at, 60.0)
    if not policy.startswith("foresize"):
        raise ForesizeError(f"--policy: {policy!r} is not a Foresize policy (foresize, ...)")
    sim = build(sc, policy=policy, seed=seed)
    known = sorted(f"{t.metadata.namespace}/{t.metadata.name}" for t in sim.targets)
    if f"{namespace}/{name}" not in known:
        raise ForesizeError(
            f"NAMESPACE/TARGET: scenario {sc.name} has no target {namespace}/{name}"
            f" (its targets: {', '.join(known) or 'none'})"
        )
    run_for(sim, at)
    return dict(sim.target_status.get(("AIScaleTarget", namespace, name), {}))


async def _live_status(
    namespace: str, name: str, kubeconfig: str | None, context: str | None, server: str | None
) -> dict[str, Any]:
    from foresize.shells.kube.api import KubeApi

    api = (
        KubeApi.from_url(server, namespace)
        if server
        else KubeApi.from_environment(kubeconfig, context)
    )
    path = f"/apis/foresize.io/v1/namespaces/{namespace}/aiscaletargets/{name}"
    try:
        try:
            answer = await api.request("GET", path)
        except OSError as exc:
            raise ForesizeError(f"{api.base_url}: cannot reach the API server ({exc})") from None
        except Exception as exc:  # httpx transport errors are not OSErrors
            raise ForesizeError(
                f"{api.base_url}: cannot reach the API server ({type(exc).__name__}: {exc})"
            ) from None
    finally:
        await api.close()
    if answer.code == 404:
        raise ForesizeError(f"AIScaleTarget {namespace}/{name}: not found")
    if not answer.ok or not isinstance(answer.body, dict):
        message = answer.body.get("message") if isinstance(answer.body, dict) else answer.body
        raise ForesizeError(f"GET AIScaleTarget {namespace}/{name}: {answer.code} {message}")
    status = answer.body.get("status")
    return status if isinstance(status, dict) else {}


def live_status(
    namespace: str, name: str, kubeconfig: str | None, context: str | None, server: str | None
) -> dict[str, Any]:
    import asyncio

    return asyncio.run(_live_status(namespace, name, kubeconfig, context, server))


def render(document: Mapping[str, Any], title: str) -> None:
    """The steps as one table per container."""
    from rich import box
    from rich.table import Table

    from foresize.core.recommend.explain import amount
    from foresize.front.report.flow import table_console

    console = table_console(False)
    for cname, entry in document["containers"].items():
        req = entry["request"]
        written = ", ".join(f"{r} {amount(r, v)}" for r, v in req.items())
        table = Table(
            title=f"{title} · container {cname} · request {written}",
            title_justify="left",
            box=box.SIMPLE_HEAD,
            pad_edge=False,
        )
        table.add_column("resource")
        table.add_column("step")
        table.add_column("value", justify="right", no_wrap=True)
        table.add_column("why", overflow="fold")
        # cpu's rows together, then memory's, each in the order the rules ran
        order = {"cpu": 0, "memory": 1}
        for s in sorted(entry["steps"], key=lambda s: order.get(s["resource"], 2)):
            table.add_row(s["resource"], s["step"], amount(s["resource"], s["value"]), s["why"])
        console.print(table)


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    @app.command("explain")
    def explain_cmd(
        target: str = typer.Argument(..., metavar="NAMESPACE/TARGET"),
        container: str | None = typer.Argument(None, metavar="[CONTAINER]"),
        scenario: str | None = typer.Option(
            None,
            "--scenario",
            "-s",
            metavar="NAME|FILE",
            help="Explain a simulator run of this scenario (built-in name or YAML file) "
            "instead of a live cluster.",
        ),
        at: str = typer.Option(
            "3d", "--at", help="With --scenario: the simulated time to explain, e.g. 36h, 3d."
        ),
        seed: int | None = typer.Option(
            None, "--seed", help="With --scenario: random seed (default: the scenario's)."
        ),
        kubeconfig: str | None = typer.Option(
            None, "--kubeconfig", help="Kubeconfig file (default: $KUBECONFIG, ~/.kube/config)."
        ),
        context: str | None = typer.Option(None, "--context", help="Kubeconfig context."),
        server: str | None = typer.Option(
            None, "--server", help="API server URL without auth (e.g. `kubectl proxy`)."
        ),
        output: str = typer.Option("table", "--output", "-o", help="table or json."),
        policy: str = typer.Option(
            "foresize",
            "--policy",
            "-p",
            help="With --scenario: the Foresize policy the run uses (foresize,"
            " foresize:MODE, foresize-window: a nightly maintenance window).",
        ),
    ) -> None:
        """Why each request of a target's suggestion is what it is: every step from the
        usage history to the number written (forecast model and its backtest error, the
        mode's quantile, buffer, schedule, memory headroom and holds, OOM floor, bounds,
        limits, rounding, QoS, hysteresis), as the recommendation recorded it; and what a
        maintenance window or a budget holds back from the pods since."""
        from foresize.core.recommend.explain import explain_status
        from foresize.front.cli.options import choice
        from foresize.front.cli.options import duration as parse_duration

        fmt = choice(output, "--output", ("table", "json"))
        namespace, name = split_target(target)
        if scenario is not None:
            if kubeconfig or context or server:
                raise ForesizeError("--scenario reads a simulator run: drop --kubeconfig/--server")
            when = parse_duration(at, "--at")
            if seed is not None and seed < 0:
                raise ForesizeError(f"--seed: must be a non-negative integer, got {seed}")
            status = simulated_status(scenario, when, namespace, name, seed, policy)
            title = f"{namespace}/{name} · scenario {scenario} at {at}"
        else:
            status = live_status(namespace, name, kubeconfig, context, server)
            title = f"{namespace}/{name}"
        document = explain_status(status, f"{namespace}/{name}", container)
        if fmt == "json":
            print(json.dumps(document, indent=2))
        else:
            render(document, title)
