"""`foresize bench nodes`: node-hours and cost of each sizing policy under a Karpenter-like
and a Cluster-Autoscaler-like node autoscaler, on scenarios built from real traces
(`foresize.bench.nodes`)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from foresize.core.errors import ForesizeError

# Beside the medians, what the run covered (a shorter or smaller run says so).
RAN = ("hours", "families", "flavours", "deployments", "runs_per_policy")


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    @bench_app.command("nodes")
    def bench_nodes_cmd(
        traces: Path = typer.Option(
            Path("../shared/traces"),
            "--trace-root",
            help="The folder holding the trace families (crane-dsp, ...).",
        ),
        duration: str = typer.Option("4d", "--duration", "-d", help="Simulated time per run."),
        family: list[str] = typer.Option(
            [], "--family", help="Trace families to build scenarios from (default: all)."
        ),
        flavour: list[str] = typer.Option(
            [], "--flavour", help="Node autoscaler flavours to run (default: both)."
        ),
        deployments: int = typer.Option(8, "--deployments", help="Deployments per scenario."),
        as_json: bool = typer.Option(
            False, "--json", help="Print the medians and each run's row as JSON."
        ),
    ) -> None:
        """static, vpa, foresize and foresize+headroom side by side: medians over the
        scenarios and both node autoscaler flavours."""
        from foresize.bench.nodes import FAMILIES, FLAVOURS, ROW_KEYS, run_bench
        from foresize.front.cli.options import duration as parse_duration_option

        hours = parse_duration_option(duration, "--duration") / 3600.0
        for f in family:
            if f not in FAMILIES:
                raise ForesizeError(
                    f"--family: unknown trace family {f!r} (one of {', '.join(FAMILIES)})"
                )
        for f in flavour:
            if f not in FLAVOURS:
                raise ForesizeError(
                    f"--flavour: unknown node autoscaler flavour {f!r} "
                    f"(one of {', '.join(FLAVOURS)})"
                )
        if deployments < 1:
            raise ForesizeError(f"--deployments: must be at least 1, got {deployments}")
        result = run_bench(
            traces,
            hours=hours,
            families=tuple(dict.fromkeys(family)) or tuple(FAMILIES),
            flavours=tuple(dict.fromkeys(flavour)) or FLAVOURS,
            deployments=deployments,
            progress=lambda msg: print(msg, file=sys.stderr),
        )
        if as_json:
            out = {
                "policies": result["policies"],
                "runs": result["runs"],
                "ran": {k: result[k] for k in RAN},
            }
            print(json.dumps(out, indent=2))
            return
        pols = result["policies"]
        print(
            f"bench nodes: {hours:g} h per run, medians over {result['runs_per_policy']} runs "
            f"({', '.join(result['families'])} x {', '.join(result['flavours'])}, "
            f"{deployments} Deployments)"
        )
        print("key".ljust(28) + "".join(p.rjust(19) for p in pols))
        for key in ROW_KEYS:
            cells = []
            for p in pols:
                v = pols[p][key]
                cells.append(
                    (", ".join(f"{k[:4]} {n:g}" for k, n in v.items()) if isinstance(v, dict)
                     else "-" if v is None else f"{v:g}").rjust(19)
                )  # fmt: skip
            print(key.ljust(28) + "".join(cells))
