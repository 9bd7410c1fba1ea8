"""Hostile files: every YAML/JSON the product reads (`foresize validate`, scenarios, the
webhook's `--state` file) goes through one loader that refuses alias bombs, deep nesting,
duplicate keys and oversized files with one line naming the file (and line), fast; scenario
sizes and numbers are bounded up front, naming the number that was too big."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from foresize.adapters.files import MAX_DEPTH, load_json, read_text
from foresize.core.errors import ForesizeError
from foresize.front.cli import app
from foresize.front.cli.validate import validate_files
from foresize.shells.sim.scenario import MAX_POD_STEPS, check_run_size, load_scenario
from foresize.shells.webhook.state_file import load_state_file
from support.sim import workload


def bomb(levels: int = 9) -> str:
    """The audit's ~360-byte "billion laughs": 9 levels of 9 aliases."""
    parts = ['&a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    prev = "a"
    for name in "bcdefghij"[: levels - 1]:
        parts.append(f"&{name} [" + ",".join([f"*{prev}"] * 9) + "]")
        prev = name
    return "[" + ", ".join(parts) + "]"


TARGET = (
    "apiVersion: foresize.io/v1\nkind: AIScaleTarget\nmetadata: {name: web, namespace: shop}\n"
    "spec:\n  scaleTargetRef: {kind: Deployment, name: web}\n  vertical:\n    mode: "
)
SCENARIO = "nodes: [{name: n, cpu: '2', memory: 4Gi}]\nworkloads:\n"


def one_error(fn, *args, limit: float = 5.0, **kwargs) -> str:
    """The one-line error `fn` raises, within `limit` seconds (a guard against hangs; the
    bomb tests ask for the acceptance figure, one second)."""
    start = time.perf_counter()
    with pytest.raises(ForesizeError) as info:
        fn(*args, **kwargs)
    assert time.perf_counter() - start < limit
    message = str(info.value)
    assert len(message.splitlines()) == 1 and len(message) < 300, message
    return message


def test_an_alias_bomb_is_refused_by_validate_in_under_a_second(tmp_path: Path):
    path = tmp_path / "bomb.yaml"
    path.write_text(TARGET + bomb() + "\n")
    assert len(path.read_bytes()) < 600
    start = time.perf_counter()
    _, _, errors = validate_files([str(path)])
    assert time.perf_counter() - start < 1.0
    assert errors == [f"{path}:7: not valid YAML (YAML aliases (*name) are not accepted)"]
    result = CliRunner().invoke(app, ["validate", str(path)])
    assert result.exit_code != 0 and isinstance(result.exception, ForesizeError)
    assert len(str(result.exception).splitlines()) == 1


def test_an_alias_bomb_in_a_scenario_is_refused(tmp_path: Path):
    path = tmp_path / "bomb.yaml"
    path.write_text(SCENARIO + "  - {kind: Deployment, name: a, replicas: " + bomb() + "}\n")
    assert "aliases" in one_error(load_scenario, str(path), limit=1.0)


def test_an_alias_bomb_in_a_state_file_is_refused(tmp_path: Path):
    path = tmp_path / "state.yaml"
    path.write_text(TARGET + bomb() + "\n")
    assert one_error(load_state_file, path, limit=1.0).startswith(f"{path}:7: ")


@pytest.mark.parametrize(
    "body",
    [
        "x: " + "[" * 100_000 + "]" * 100_000 + "\n",
        "".join(f"{'  ' * i}k{i}:\n" for i in range(1_000)) + "  " * 1_000 + "v: 1\n",
    ],
    ids=["flow", "block"],
)
def test_deep_nesting_is_one_line_not_a_recursion_error(tmp_path: Path, body: str):
    path = tmp_path / "deep.yaml"
    path.write_text(body)
    assert f"deeper than {MAX_DEPTH}" in one_error(load_scenario, str(path))
    _, _, errors = validate_files([str(path)])
    assert len(errors) == 1 and f"deeper than {MAX_DEPTH}" in errors[0]


def test_deep_json_state_is_one_line(tmp_path: Path):
    path = tmp_path / "state.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    assert "nested" in one_error(load_state_file, path)
    assert "nested" in one_error(load_json, "[" * 200 + "]" * 200, "s.json")


def test_a_duplicate_key_names_its_line(tmp_path: Path):
    path = tmp_path / "dup.yaml"
    path.write_text(TARGET + "auto\n  vertical: {mode: observe}\n")
    _, _, errors = validate_files([str(path)])
    assert errors == [
        f"{path}:8: spec.vertical: not valid YAML (key 'vertical' appears twice in one mapping)"
    ]


HUGE = "1" * 5000  # past Python's 4,300-digit int conversion limit


def test_a_5000_digit_integer_is_one_line_naming_file_line_and_field(tmp_path: Path):
    # PyYAML's int() raised ValueError (not a YAML error): `validate` and `simulate`
    # printed a 63-line traceback, exit 1.
    path = tmp_path / "t.yaml"
    path.write_text(
        TARGET.replace(
            "  vertical:\n    mode: ", f"  horizontal: {{mode: autonomous, minReplicas: {HUGE}}}\n"
        )
    )
    expected = (
        f"{path}:6: spec.horizontal.minReplicas: not valid YAML (an integer written with "
        "5000 characters (at most 100))"
    )
    assert validate_files([str(path)])[2] == [expected]
    result = CliRunner().invoke(app, ["validate", str(path)])
    assert isinstance(result.exception, ForesizeError) and str(result.exception) == expected
    scenario = tmp_path / "s.yaml"
    scenario.write_text(SCENARIO + f"  - {{kind: Deployment, name: a, replicas: {HUGE}}}\n")
    assert one_error(load_scenario, str(scenario)) == (
        f"{scenario}:3: workloads[0].replicas: not valid YAML (an integer written with "
        "5000 characters (at most 100))"
    )
    state = tmp_path / "state.json"
    state.write_text(f'{{"kind": "AIScaleTarget",\n "spec": {{"x": "{HUGE}", "y": {HUGE}}}}}')
    assert one_error(load_state_file, state) == (
        f"{state}:2: not valid JSON (an integer written with 5000 characters (at most 100))"
    )


@pytest.mark.parametrize(
    "value,problem",
    [
        ("0x" + "f" * 200, "an integer written with 202 characters (at most 100)"),
        ("1" + ":30" * 100, "an integer written with 301 characters (at most 100)"),
        ("1." + "5" * 200, "a number written with 202 characters (at most 100)"),
        ("1.0e+999", "'1.0e+999' is beyond the float range"),
        ("2023-02-30", "day is out of range for month"),
        ("!!int abc", "invalid literal for int() with base 10: 'abc'"),
        ("!!float x", "could not convert string to float: 'x'"),
        ("!!timestamp 1", "not a valid timestamp"),
    ],
)
def test_a_value_the_loader_cannot_build_is_one_line_naming_its_field(value: str, problem: str):
    from foresize.adapters.files import load_documents

    text = f"a:\n  b: [1, {{c: {value}}}]\n"
    message = one_error(load_documents, text, "x.yaml")
    assert message == f"x.yaml:2: a.b[1].c: not valid YAML ({problem})"


def test_numbers_within_the_caps_still_read():
    from foresize.adapters.files import load_one

    text = "a: [0x1f, 1_000, 1:30, 9223372036854775807, 1.5e+308, .inf, 2023-02-28, -1e3]"
    assert load_one(text, "x")["a"][:5] == [31, 1000, 90, 2**63 - 1, 1.5e308]
    assert load_json("[9223372036854775807, 1.5e308, -2.5]", "x") == [2**63 - 1, 1.5e308, -2.5]


def test_an_oversized_file_is_refused_before_it_is_read(tmp_path: Path):
    path = tmp_path / "big.yaml"
    path.write_bytes(b"#" * 5000)
    message = one_error(read_text, path, max_bytes=4096)
    assert "larger than 4096 bytes" in message


def test_a_latin1_scenario_is_one_line(tmp_path: Path):
    path = tmp_path / "latin.yaml"
    path.write_bytes((SCENARIO + "  - {kind: Deployment, name: caf\xe9}\n").encode("latin-1"))
    assert "not UTF-8" in one_error(load_scenario, str(path))


def _scenario(tmp_path: Path, data: dict) -> str:
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


@pytest.mark.parametrize(
    "mutate,number",
    [
        (lambda d: d["nodes"][0].update(count=100_000), "100000"),
        (lambda d: d["nodes"][0].update(count=1_000_000_000), "1000000000"),
        (lambda d: d["workloads"][0].update(replicas=1_000_000_000), "1000000000"),
        (lambda d: d["workloads"].extend(workload(f"w{i}", replicas=4000) for i in range(3)), ""),
    ],
)
def test_oversized_scenarios_are_refused_naming_the_number(tmp_path, mutate, number):
    data = {"nodes": [{"name": "n", "cpu": "2", "memory": "4Gi"}], "workloads": [workload("a")]}
    mutate(data)
    message = one_error(load_scenario, _scenario(tmp_path, data))
    assert number in message and "at most" in message


@pytest.mark.parametrize("value", [float("nan"), float("inf"), 1e308])
def test_non_finite_and_absurd_generator_numbers_are_refused(tmp_path, value):
    data = {"nodes": [{"name": "n", "cpu": "2", "memory": "4Gi"}], "workloads": [workload("a")]}
    usage = data["workloads"][0]["containers"][0]["usage"]
    usage["cpu"] = {"generator": "diurnal", "base": "100m", "amplitude": value}
    message = one_error(load_scenario, _scenario(tmp_path, data))
    assert "amplitude" in message


def test_a_run_too_long_for_its_pods_is_refused_up_front(tmp_path):
    data = {"nodes": [{"name": "n", "cpu": "2", "memory": "4Gi"}], "workloads": [workload("a")]}
    data["workloads"][0]["replicas"] = 1000
    sc = load_scenario(_scenario(tmp_path, data))
    check_run_size(sc, 86400, 60)  # 1000 pods x 1440 steps is fine
    days = MAX_POD_STEPS // (1000 * 1440) + 1
    with pytest.raises(ForesizeError, match=r"1000 pods x \d+ steps") as info:
        check_run_size(sc, days * 86400, 60)
    assert str(MAX_POD_STEPS) in str(info.value)


# --- traces: absurd readings are bad rows, never requests -----------------------------


def _bb_row(t: int, mhz: float) -> str:
    vals = [t, 2, 5000.0, mhz, 25.0, 8_000_000.0, 1_000_000.0, 0.0, 0.0, 0.0, 0.0]
    return ";\t".join(str(v) for v in vals)


def test_a_1e308_mhz_bitbrains_row_is_skipped_and_named(tmp_path: Path):
    # Audit F-10: 1e308 MHz became a 300-digit cpu_request with exit 0.
    from foresize.adapters.history.traces import ReadReport, read_bitbrains

    path = tmp_path / "1.csv"
    path.write_text("\n".join([_bb_row(300 * i, 1e308 if i == 2 else 1250.0) for i in range(5)]))
    report = ReadReport()
    series = read_bitbrains(path, report)
    assert series is not None and float(series.cpu.max()) == pytest.approx(0.5)
    assert report.skipped == 1
    assert any("1.csv:3" in p and "above any machine" in p for p in report.problems)


@pytest.mark.parametrize(
    "cpu,memory,problem",
    [("1e308", "1e6", "cpu usage"), ("0.5", "1e30", "memory usage"), ("-1", "1e6", "negative")],
)
def test_absurd_canonical_rows_are_skipped(tmp_path: Path, cpu, memory, problem):
    from foresize.adapters.history.traces import ReadReport, read_canonical_csv

    path = tmp_path / "c.csv"
    rows = ["timestamp,namespace,workload,pod,container,cpu_cores,memory_bytes"]
    rows += [f"{60 * i},ns,web,p,app,0.5,1e6" for i in range(3)]
    rows.append(f"600,ns,web,p,app,{cpu},{memory}")
    path.write_text("\n".join(rows) + "\n")
    report = ReadReport()
    (series,) = read_canonical_csv(path, report)
    assert report.skipped == 1 and problem in report.problems[0] and "c.csv:5" in report.problems[0]
    assert float(np.nanmax(series.cpu)) == 0.5


@pytest.mark.parametrize("memory", ["0.3", "2.5", "512", "0"])
def test_memory_in_a_larger_unit_is_refused_naming_file_and_column(tmp_path: Path, memory):
    # memory_bytes written in GiB (0.3) read as 0.3 bytes: "0 skipped", exit 0, and a
    # 1Mi memory recommendation that would OOM-kill every pod.
    from foresize.adapters.history.traces import load_traces

    path = tmp_path / "gib.csv"
    rows = ["timestamp,namespace,workload,pod,container,cpu_cores,memory_bytes"]
    rows += [f"{1700000000 + 60 * i},shop,web,web-1,app,0.5,{memory}" for i in range(50)]
    rows += [f"{1700000000 + 60 * i},shop,db,db-0,pg,0.5,2e9" for i in range(50)]
    path.write_text("\n".join(rows) + "\n")
    message = one_error(load_traces, path, "canonical")
    assert message.startswith(f"{path}: column memory_bytes: shop/web/app peaks at ")
    assert "must be in bytes" in message


def test_memory_of_a_small_real_container_is_read(tmp_path: Path):
    from foresize.adapters.history.traces import load_traces

    path = tmp_path / "small.csv"
    rows = ["timestamp,namespace,workload,pod,container,cpu_cores,memory_bytes"]
    rows += [
        f"{1700000000 + 60 * i},kube-system,pause,p,pause,0.001,{300 * 1024}" for i in range(5)
    ]
    path.write_text("\n".join(rows) + "\n")
    ((series,), _) = load_traces(path, "canonical")
    assert float(series.memory.max()) == 300 * 1024


def test_crane_values_above_any_machine_are_skipped(tmp_path: Path):
    from foresize.adapters.history.traces import ReadReport, read_crane

    path = tmp_path / "x.csv"
    path.write_text("ts,value\n60,1.5\n120,1e308\n180,2\n")
    report = ReadReport()
    series = read_crane(path, report)
    assert series is not None and list(series.cpu) == [1.5, 2.0] and report.skipped == 1


def test_a_device_as_a_trace_file_is_one_line_not_a_memory_error(tmp_path: Path):
    # Audit 4b: `file: /dev/zero` ended in a MemoryError traceback after 10 s.
    data = {"nodes": [{"name": "n", "cpu": "2", "memory": "4Gi"}], "workloads": [workload("a")]}
    usage = data["workloads"][0]["containers"][0]["usage"]
    usage["cpu"] = {"generator": "trace", "file": "/dev/zero"}
    message = one_error(load_scenario, _scenario(tmp_path, data))
    assert "/dev/zero" in message and "not a regular file" in message
    from foresize.adapters.history.traces import load_traces

    assert "/dev/zero" in one_error(load_traces, "/dev/zero", "crane")


def test_a_budget_above_100_percent_is_refused(tmp_path: Path):
    data = {"nodes": [{"name": "n", "cpu": "2", "memory": "4Gi"}], "workloads": [workload("a")]}
    data["pdbs"] = [{"name": "p", "selector": {"app": "a"}, "min_available": "150%"}]
    assert "min_available" in one_error(load_scenario, _scenario(tmp_path, data))
