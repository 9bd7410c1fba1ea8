"""`foresize bench webhook`: latency of the real HTTPS webhook server on loopback."""

from __future__ import annotations

import typer


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    @bench_app.command("webhook")
    def bench_webhook(
        rate: float = typer.Option(200.0, help="Reference rate (requests/s)."),
        duration_text: str = typer.Option("3s", "--duration", help="Per measurement at --rate."),
        repeats: int = typer.Option(3, help="Measurements at --rate (median reported)."),
        max_rate: float = typer.Option(6400.0, help="Highest rate the ramp tries."),
        ramp_text: str = typer.Option("2s", "--ramp-duration", help="Per ramp step."),
        targets: int = typer.Option(1000, help="Autonomous targets in the server's index."),
        budget_text: str = typer.Option("60s", "--budget", help="Upper bound on the ramp."),
        slow_connections: int = typer.Option(
            200, help="Slow-loris connections held open during a second load run (0: skip)."
        ),
        idle_connections: int = typer.Option(
            1000, help="Idle TLS connections opened, then closed by the server (0: skip)."
        ),
        as_json: bool = typer.Option(False, "--json", help="Print JSON only."),
    ) -> None:
        """Pod AdmissionReviews from a concurrent load generator against the real server
        (own process, self-signed TLS): p50/p99 at --rate, the highest rate with p99 under
        10 ms, and the same server's no-op review (the floor)."""
        import json

        from foresize.bench.webhook import run_bench
        from foresize.core.errors import ForesizeError
        from foresize.front.cli.options import duration as parse_duration_option

        duration = parse_duration_option(duration_text, "--duration")
        ramp_duration = parse_duration_option(ramp_text, "--ramp-duration")
        budget = parse_duration_option(budget_text, "--budget")

        for name, value in (
            ("rate", rate),
            ("duration", duration),
            ("repeats", repeats),
            ("max-rate", max_rate),
            ("ramp-duration", ramp_duration),
            ("targets", targets),
            ("budget", budget),
        ):
            if value <= 0:
                raise ForesizeError(f"--{name} must be positive")
        for name, count in (
            ("slow-connections", slow_connections),
            ("idle-connections", idle_connections),
        ):
            if not 0 <= count <= 5000:
                raise ForesizeError(f"--{name} must be between 0 and 5000, got {count}")
        result = run_bench(
            rate=rate,
            duration=duration,
            repeats=repeats,
            max_rate=max_rate,
            ramp_duration=ramp_duration,
            n_targets=targets,
            budget=budget,
            slow_connections=slow_connections,
            idle_connections=idle_connections,
        )
        data = result.to_json()
        if as_json:
            typer.echo(json.dumps(data))
            return
        from rich.console import Console
        from rich.table import Table

        table = Table(title=f"webhook latency on loopback ({targets} autonomous targets)")
        for col in ("endpoint", "rate/s", "requests", "errors", "p50 ms", "p99 ms"):
            table.add_column(col, justify="right" if col != "endpoint" else "left")
        table.add_row(
            "/mutate-pods",
            f"{rate:g}",
            str(data["requests"]),
            str(data["errors"]),
            f"{data['p50_ms']:.2f}",
            f"{data['p99_ms']:.2f}",
        )
        table.add_row(
            "/noop (floor)",
            f"{rate:g}",
            "",
            "",
            f"{data['noop']['p50_ms']:.2f}",
            f"{data['noop']['p99_ms']:.2f}",
        )
        for step in data["ramp"]:
            table.add_row(
                "  ramp",
                f"{step['rate']:g}",
                f"(achieved {step['achieved_rate']:g}/s)",
                str(step["errors"]),
                f"{step['p50_ms']:.2f}",
                f"{step['p99_ms']:.2f}",
            )
        abuse = data["abuse"]
        slow = abuse.get("slow_loris")
        if slow:
            table.add_row(
                f"  + {slow['connections']} slow-loris",
                f"{rate:g}",
                str(slow["requests"]),
                str(slow["errors"]),
                f"{slow['p50_ms']:.2f}",
                f"{slow['p99_ms']:.2f}",
            )
        console = Console()
        console.print(table)
        console.print(
            f"10 KB malicious quantity answered in {abuse['malicious_quantity_ms']:.2f} ms; "
            f"server RSS {abuse['rss_mib_baseline']} MiB"
            + (
                f", {abuse['rss_mib_with_slow_connections']} MiB with the slow connections "
                f"(p99 x{slow['p99_ratio_to_quiet']} of quiet)"
                if slow
                else ""
            )
        )
        idle = abuse.get("idle")
        if idle:
            console.print(
                f"{idle['connections']} idle connections: RSS {idle['rss_mib_before']} -> "
                f"{idle['rss_mib_while_open']} MiB while open, {idle['rss_mib_after']} MiB after "
                f"the server closed {idle['closed_by_server']} of them in "
                f"{idle['seconds_until_all_closed']} s"
            )
        goal = "met" if data["p99_ms"] < 5.0 else "NOT met"
        console.print(
            f"highest rate with p99 < 10 ms: {data['max_rate_p99_under_10ms']:g}/s; "
            f"goal p99 < 5 ms at {rate:g}/s: {goal}; patched share {data['patched_share']:.0%}"
        )
        console.print(
            f"handler alone (decode, decide, encode; no HTTP/TLS): pod "
            f"{data['handler_us']['pod']:.0f} us, no-op {data['handler_us']['noop']:.0f} us; "
            f"p99 from actual send (not schedule): {data['service_p99_ms']:.2f} ms"
        )
