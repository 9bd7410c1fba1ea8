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
        print(
            "per scenario (cpu_request_core_hours / replica_changes_per_day / "
            "underprovisioned_seconds / seconds_at_max_replicas / throttled_seconds):"
        )
        for run in result["runs"]:
            print(
                f"  {run['scenario']:<16}{run['policy']:<26}"
                f"{run['cpu_request_core_hours']:9.1f}{run['replica_changes_per_day']:7.1f}"
                f"{run['underprovisioned_seconds']:7.0f}{run['seconds_at_max_replicas']:7.0f}"
                f"{run['throttled_seconds']:7.0f}"
            )
        print(
            "bounds, from the hpa runs (what no sizing beats with the HPA in the loop; "
            "the team's request against the per-pod p95 at the HPA's median count):"
        )
        for b in result["bounds"]:
            print(
                f"  {b['scenario']:<16}band-edge cpu request {b['band_edge_cpu_request_ratio']:.3f}"
                f" x hpa ({b['band_edge_cpu_request_ratio_after_warmup']:.3f} x after "
                "Foresize's 24 h warm-up); under-provisioned at 0.9 x hpa's requests "
                f"{b['underprovisioned_seconds_at_cut']:.0f} s; hpa's under-provisioned "
                f"seconds in the first step of a jump "
                f"{b['underprovisioned_seconds_first_step_of_a_jump']:.0f} s; median replicas "
                f"{b['median_replicas']}, per-pod p95 {b['per_pod_p95_at_median_cores']:.2f} "
                f"cores, request / p95 {b['team_request_over_that_p95']:.2f}"
            )
        c = result["collision"]
        print(
            f"collision (seed 004): {c['own_preemptions']} own preemptions, "
            f"{c['pending_due_to_resize']} pods Pending because of an upsize"
        )
