"""One meaning per option name across `foresize` commands (foresize.front.cli.options):
`-o/--output` is the output format and `--trace-format` the trace file format; durations
take units; benchmarks repeat with `--repeats`. The older spellings still work, hidden."""

from __future__ import annotations

import pytest
import typer
from typer.testing import CliRunner

from foresize.core.errors import ForesizeError
from foresize.front.cli import app
from foresize.front.cli.options import duration


def _commands() -> dict:
    root = typer.main.get_command(app)
    out = {}
    for name, cmd in root.commands.items():
        if hasattr(cmd, "commands"):  # a group (typer has its own click)
            for sub, subcmd in cmd.commands.items():
                out[f"{name} {sub}"] = subcmd
        else:
            out[name] = cmd
    return out


def _visible(cmd) -> dict:
    return {
        opt: p
        for p in cmd.params
        if p.param_type_name == "option" and not getattr(p, "hidden", False)
        for opt in p.opts
    }


def test_format_means_the_output_and_trace_format_the_files():
    for name, cmd in _commands().items():
        opts = _visible(cmd)
        # `--format` is never shown: the output format is -o/--output everywhere.
        assert "--format" not in opts, name
        if "--traces" in opts:
            assert "--trace-format" in opts, name
    # Repetitions are --repeats in every benchmark that repeats.
    for name in ("bench sim", "bench forecast", "bench plan", "bench webhook"):
        opts = _visible(_commands()[name])
        assert "--repeats" in opts and not {"--runs", "--repeat"} & set(opts), name


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90s", 90.0), ("5m", 300.0), ("1h30m", 5400.0), ("14d", 14 * 86400.0), ("300", 300.0)],
)
def test_durations_take_units(text, seconds):
    assert duration(text, "--step") == seconds


def test_a_bad_duration_names_the_option():
    with pytest.raises(ForesizeError, match=r"^--budget: '5 minutes' is not a duration"):
        duration("5 minutes", "--budget")


def test_old_spellings_still_work_hidden(tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text(
        "timestamp,namespace,workload,pod,container,cpu_cores,memory_bytes\n"
        + "".join(f"{300 * i},shop,web,web-1,app,0.5,100000000\n" for i in range(300))
    )
    runner = CliRunner()
    new = runner.invoke(app, ["recommend", "--traces", str(trace), "-o", "json"])
    old = runner.invoke(app, ["recommend", "--traces", str(trace), "--format", "json"])
    assert new.exit_code == old.exit_code == 0, new.output + old.output
    assert new.stdout == old.stdout
    missing = runner.invoke(app, ["bench", "recommend", "--traces", str(trace)])
    assert str(missing.exception).startswith("--trace-format is required")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--interval", "fast"], "--interval: 'fast' is not a duration"),
        (["--collect-interval", "1s"], "--collect-interval: must be at least 5s, got '1s'"),
        (
            ["--lease-duration", "10s", "--lease-renew-deadline", "15s"],
            "--lease-renew-deadline: 15s must be shorter than --lease-duration 10s",
        ),
    ],
)
def test_operator_durations_take_units_and_are_checked(args, message):
    result = CliRunner().invoke(app, ["operator", "--no-webhook", *args])
    assert isinstance(result.exception, ForesizeError), result.output
    assert str(result.exception).startswith(message)


def test_every_duration_option_shows_a_unit_default():
    """No duration option of any command shows a bare number of seconds as its default."""
    names = ("interval", "duration", "timeout", "lookback", "step", "budget", "deadline", "retry")
    for name, cmd in _commands().items():
        for opt, p in _visible(cmd).items():
            if any(n in opt for n in names) and opt.startswith("--") and p.default is not None:
                assert isinstance(p.default, str) and p.default[-1].isalpha(), (name, opt)


def test_namespace_says_which_of_its_two_meanings_it_has():
    """ux.md R38: `--namespace` filters in `recommend` (and `simulate --prometheus`, which
    reads as it does) and names the namespace Foresize is
    installed in everywhere else; every help text now says which."""
    seen = set()
    for name, cmd in _commands().items():
        p = _visible(cmd).get("--namespace")
        if p is None:
            continue
        seen.add(name)
        if name in ("recommend", "simulate"):  # simulate --prometheus reads as recommend
            assert p.help.startswith("A filter: "), p.help
        else:
            assert p.help.startswith("Namespace Foresize is installed in"), (name, p.help)
            assert "(not a filter" in p.help, (name, p.help)
    assert {"recommend", "operator", "webhook"} <= seen
    assert any(n.startswith("manifests") for n in seen), seen
