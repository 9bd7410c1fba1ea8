"""The `foresize` command. Each subcommand lives in its own module of this package and
registers itself here; heavy imports happen inside the commands so `--help` stays fast."""

from __future__ import annotations

import sys

import typer
from typer.core import TyperCommand, TyperGroup

from foresize.core.errors import ForesizeError


class _ValueColumnMixin:
    """`--help` names the value to write, never a Python type (see options.METAVAR_BY_OPTION).

    Options get their metavar from `_describe_values` below; here the two params typer makes
    itself: `--help` (a flag: nothing) and positional arguments, whose name column already
    says what to write (newer typer would add `<str>` beside it; older ones have no
    `display_type_rich` and show click's `TEXT`)."""

    def get_params(self, ctx):  # type: ignore[no-untyped-def]
        params = super().get_params(ctx)  # type: ignore[misc]
        for param in params:
            if getattr(param, "param_type_name", None) == "argument":
                if hasattr(param, "display_type_rich"):
                    param.display_type_rich = lambda ctx: None
            elif param.metavar is None and getattr(param, "is_flag", False):
                param.metavar = ""  # `--help`
        return params


class ForesizeCommand(_ValueColumnMixin, TyperCommand):
    pass


class ForesizeGroup(_ValueColumnMixin, TyperGroup):
    pass


app = typer.Typer(
    cls=ForesizeGroup,
    name="foresize",
    help="Forecast-driven in-place autoscaler for Kubernetes workloads.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Markdown reflows docstring paragraphs instead of keeping their hard line breaks.
    rich_markup_mode="markdown",
)
bench_app = typer.Typer(
    cls=ForesizeGroup,
    rich_markup_mode="markdown",
    help="Benchmarks: recommendation quality and control-plane speed (see architecture §3.7).",
    no_args_is_help=True,
)
app.add_typer(bench_app, name="bench")

# Modules that register subcommands: `register(app, bench_app)`.
_COMMAND_MODULES = (
    "simulate",
    "bench_sim",
    "bench_nodes",
    "bench_hpa",
    "bench_runtimes",
    "bench_deferred",
    "bench_history_store",
    "bench_windows",
    "bench_recommend",
    "bench_bound",
    "bench_forecast",
    "bench_plan",
    "bench_webhook",
    "bench_loop",
    "bench_shard",
    "bench_chaos",
    "manifests",
    "validate",
    "webhook",
    "operator",
    "recommend",
    "explain",
)


def _register_all() -> None:
    import importlib

    for name in _COMMAND_MODULES:
        module = importlib.import_module(f"foresize.front.cli.{name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(app, bench_app)


def _describe_values(typer_app: typer.Typer) -> None:
    """Give every option of every command a metavar saying what to write (`DURATION`,
    `FILE`, `N`; nothing for a flag) unless it has one, and the `--help` fix above."""
    import inspect
    import typing

    from typer.models import OptionInfo

    from foresize.front.cli.options import metavar_for

    for info in typer_app.registered_commands:
        if info.cls in (None, TyperCommand):  # the default (None in older typer)
            info.cls = ForesizeCommand
        callback = info.callback
        if callback is None:
            continue
        hints = typing.get_type_hints(callback, include_extras=True)
        # String annotations (`from __future__ import annotations`) make a new OptionInfo
        # each time they are evaluated: keep the evaluated ones, which typer reads as they are.
        callback.__annotations__.update(hints)
        for name, parameter in inspect.signature(callback).parameters.items():
            annotation = hints.get(name, str)
            infos = [parameter.default]
            if typing.get_origin(annotation) is typing.Annotated:
                infos += typing.get_args(annotation)[1:]
            for option in infos:
                if isinstance(option, OptionInfo) and option.metavar is None:
                    # In `Annotated[..., typer.Option("--x")]` the first name sits in `default`.
                    names = [option.default, *(option.param_decls or ())]
                    decls = [d for d in names if isinstance(d, str) and d.startswith("--")]
                    decls = decls or ["--" + name.replace("_", "-")]
                    option.metavar = metavar_for(decls, annotation)


_register_all()
_describe_values(app)
_describe_values(bench_app)


def main() -> None:
    """Console entry point: user errors become one line on stderr and exit status 2."""
    try:
        app()
    except ForesizeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
