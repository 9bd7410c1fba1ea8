"""`foresize bench hpa`: an HPA on CPU alone, with the VPA-style recommender, and with
Foresize leaving or coordinating its resource, on trace-driven traffic
(`foresize.bench.hpa`)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from foresize.core.errors import ForesizeError


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    @bench_app.command("hpa")
    def bench_hpa_cmd(
        traces: Path = typer.Option(
            Path("../shared/traces"),
            "--trace-root",
            help="The folder holding the trace families (crane-dsp, ...).",
        ),
        duration: str = typer.Option("4d", "--duration", "-d", help="Simulated time per run."),
        family: list[str] = typer.Option(
            [], "--family", help="Trace families to build scenarios from (default: all)."
        ),
        collision_duration: str = typer.Option(
            "4d", "--collision-duration", help="Simulated time of the seed-004 collision run."
        ),
        as_json: bool = typer.Option(False, "--json", help="Print the medians as JSON."),
    ) -> None:
        """hpa, hpa+vpa, hpa+foresize-leave and hpa+foresize-coordinated side by side:
        medians over the scenarios, and the seed-004 collision."""
        from foresize.bench.hpa import FAMILIES, KEYS, run_bench
        from foresize.front.cli.options import duration as parse_duration_option

        hours = parse_duration_option(duration, "--duration") / 3600.0
        collision_hours = parse_duration_option(collision_duration, "--collision-duration") / 3600.0
        for f in family:
            if f not in FAMILIES:
                raise ForesizeError(
                    f"--family: unknown trace family {f!r} (one of {', '.join(FAMILIES)})"
                )
        result = run_bench(
            traces,
            hours=hours,
            families=tuple(family) or tuple(FAMILIES),
            collision_hours=collision_hours,
            progress=lambda msg: print(msg, file=sys.stderr),
        )
        if as_json:
            print(
                json.dumps(
                    {"policies": result["policies"], "collision": result["collision"]}, indent=2
                )
            )
            return
        pols = result["policies"]
        print(f"bench hpa: {hours:g} h per run, medians over {len(result['families'])} scenarios")
        print("key".ljust(26) + "".join(p.rjust(26) for p in pols))
        for key in KEYS:
            print(key.ljust(26) + "".join(f"{pols[p][key]:g}".rjust(26) for p in pols))
        c = result["collision"]
        print(
            f"collision (seed 004): {c['own_preemptions']} own preemptions, "
            f"{c['pending_due_to_resize']} pods Pending because of an upsize"
        )
