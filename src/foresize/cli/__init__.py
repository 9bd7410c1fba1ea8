"""The `foresize` command. Each subcommand lives in its own module of this package and
registers itself here; heavy imports happen inside the commands so `--help` stays fast."""

from __future__ import annotations

import sys

import typer

from foresize.errors import ForesizeError

app = typer.Typer(
    name="foresize",
    help="Forecast-driven in-place autoscaler for Kubernetes workloads.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Markdown reflows docstring paragraphs instead of keeping their hard line breaks.
    rich_markup_mode="markdown",
)
bench_app = typer.Typer(
    rich_markup_mode="markdown",
    help="Benchmarks: recommendation quality and control-plane speed (see architecture §3.7).",
    no_args_is_help=True,
)
app.add_typer(bench_app, name="bench")

# Modules that register subcommands: `register(app, bench_app)`.
_COMMAND_MODULES = (
    "simulate",
    "bench_sim",
    "bench_recommend",
    "bench_bound",
    "bench_forecast",
    "bench_plan",
    "bench_webhook",
    "bench_loop",
    "bench_chaos",
    "manifests",
    "webhook",
    "operator",
    "recommend",
)


def _register_all() -> None:
    import importlib

    for name in _COMMAND_MODULES:
        module = importlib.import_module(f"foresize.cli.{name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(app, bench_app)


_register_all()


def main() -> None:
    """Console entry point: user errors become one line on stderr and exit status 2."""
    try:
        app()
    except ForesizeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
