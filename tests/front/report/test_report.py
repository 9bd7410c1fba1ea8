"""`foresize simulate --report DIR` / `--compare`: the HTML report and its figures, on tiny
scenarios (a few simulated hours) so the whole file stays fast."""

from __future__ import annotations

import json
import re
import struct
from html.parser import HTMLParser

import pytest
import yaml
from typer.testing import CliRunner

from foresize.core.api.quantity import MIB
from foresize.core.cluster.actions import ContainerResize, ResizePod
from foresize.front.cli import app
from foresize.front.report.recorder import NodeGapSampler, UsageRecorder, pod_gap, risk_events
from foresize.shells.sim.cluster import SimCluster
from foresize.shells.sim.scenario import parse_scenario
from support.sim import container, make_sim, pods_of, workload

# A leaky worker that outgrows its 1 GiB memory limit within the first hour (OOM kills),
# next to a steady one.
TINY = {
    "name": "tiny",
    "seed": 3,
    "nodes": [{"name": "n", "count": 2, "cpu": "2", "memory": "4Gi"}],
    "workloads": [
        workload(
            "leaky",
            containers=[
                container(
                    req={"cpu": "300m", "memory": "768Mi"},
                    lim={"cpu": "600m", "memory": "1Gi"},
                    cpu={"generator": "diurnal", "base": "200m", "noise": 0.1},
                    memory={"generator": "leak", "base": "700Mi", "growth_per_hour": "600Mi"},
                )
            ],
        ),
        workload(
            "steady",
            replicas=2,
            containers=[
                container(
                    req={"cpu": "500m", "memory": "512Mi"},
                    lim={"cpu": "1", "memory": "1Gi"},
                    cpu={"generator": "constant", "base": "150m", "noise": 0.05},
                    memory={"generator": "constant", "base": "200Mi"},
                )
            ],
        ),
    ],
}


@pytest.fixture
def tiny(tmp_path):
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(TINY))
    return str(path)


def run_cli(*args: str) -> str:
    # These tests read the static run's numbers unless they name a policy themselves.
    if "--policy" not in args and "--compare" not in args:
        args = ("--policy", "static", *args)
    result = CliRunner().invoke(app, ["simulate", "--no-progress", *args])
    assert result.exit_code == 0, result.output
    return result.stdout


class _Page(HTMLParser):
    """Collects what the tests look at: image sources, external references, table rows."""

    def __init__(self) -> None:
        super().__init__()
        self.images: list[str] = []
        self.external: list[str] = []
        self.tables: list[tuple[dict[str, str | None], list[list[str]]]] = []
        self._cell: list[str] | None = None
        self._row: list[str] | None = None
        self.scripts: list[dict[str, str | None]] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "img":
            self.images.append(a["src"] or "")
        for key in ("src", "href"):
            v = a.get(key)
            if v and re.match(r"^(https?:)?//", v):
                self.external.append(v)
        if tag == "link":
            self.external.append(str(a))
        if tag == "script":
            self.scripts.append(a)
        if tag == "table":
            self.tables.append((a, []))
        elif tag == "tr" and self.tables:
            self._row = []
            self.tables[-1][1].append(self._row)
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row.append(" ".join("".join(self._cell).split()))
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)

    def table(self, cls: str, policy: str | None = None) -> list[list[str]]:
        for attrs, rows in self.tables:
            if attrs.get("class") == cls and (policy is None or attrs.get("data-policy") == policy):
                return rows
        raise AssertionError(f"no table {cls!r} for {policy!r}")


def parse(path) -> tuple[str, _Page]:
    text = (path / "index.html").read_text()
    page = _Page()
    page.feed(text)
    return text, page


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_report_directory_has_index_and_every_png_it_references(tiny, tmp_path):
    out = tmp_path / "rep"
    run_cli("--scenario", tiny, "-d", "3h", "--report", str(out))
    text, page = parse(out)
    # Two workloads x (cpu, memory), the headline, and the OOM-kill risk timelines.
    assert len(page.images) >= 6
    assert "headline.png" in page.images
    assert any(src.endswith("-cpu.png") for src in page.images)
    assert any(src.endswith("-memory.png") for src in page.images)
    assert any(src.startswith("risks-") for src in page.images)
    for src in page.images:
        data = (out / src).read_bytes()
        width, height = png_size(data)
        assert width >= 600 and height >= 200, src
        assert len(data) > 8000, f"{src} is suspiciously small ({len(data)} bytes)"
    # Self-contained: no external assets, no script code (only the JSON data block).
    assert page.external == []
    assert all(s.get("type") == "application/json" and "src" not in s for s in page.scripts)
    assert "<style>" in text
    # Each PNG in the directory is used (no stale figures from a previous layout).
    assert {p.name for p in out.glob("*.png")} == set(page.images)


def test_headline_numbers_equal_the_json_summary_of_the_same_run(tiny, tmp_path):
    out = tmp_path / "rep"
    summary = json.loads(run_cli("--scenario", tiny, "-d", "3h", "--json", "--report", str(out)))
    text, _ = parse(out)
    totals = summary["totals"]
    assert totals["oom_kills"] > 0 and totals["throttled_seconds"] >= 0  # a non-trivial run
    cells = {
        (m["policy"], m["key"]): (m["value"], m["text"])
        for m in re.finditer(
            r"data-policy='(?P<policy>[^']+)' data-key='(?P<key>[^']+)' "
            r"data-value='(?P<value>[^']*)'>(?P<text>[^<]*)</td>",
            text.split("id='workloads'")[0],  # the headline section only
        )
    }
    shown = {
        "cpu_requested_core_hours": "{:.2f}",
        "memory_requested_gib_hours": "{:.2f}",
        "oom_kills": "{}",
        "throttled_seconds": "{:.0f}",
        "evictions": "{}",
        "stalls": "{}",
        "breaker_openings": "{}",
        "preemptions": "{}",
    }
    for key, fmt in shown.items():
        value, visible = cells[("static", key)]
        assert float(value) == pytest.approx(totals[key], abs=1e-9), key
        assert visible == fmt.format(totals[key]), key
    # The same command without --report prints the very same summary (recording is
    # read-only: the event log fingerprint matches too).
    plain = json.loads(run_cli("--scenario", tiny, "-d", "3h", "--json"))
    assert plain == summary
    # And the references for the headline ran: vpa is in the table with its savings.
    assert ("vpa", "cpu_requested_core_hours") in cells
    assert re.search(r"data-policy='vpa' data-key='cpu_requested_core_hours_saved_vs_static'", text)


def test_compare_lists_each_policy_side_by_side(tiny, tmp_path):
    out = tmp_path / "cmp"
    data = json.loads(
        run_cli(
            "--scenario", tiny, "-d", "2h", "--json", "--compare", "static,vpa,foresize",
            "--report", str(out), "--events", str(tmp_path / "ev.jsonl"),
        )
    )  # fmt: skip
    assert data["policies"] == ["static", "vpa", "foresize"]
    assert [r["policy"] for r in data["runs"]] == ["static", "vpa", "foresize"]
    assert "savings_vs_static" in data["runs"][2] and "savings_vs_static" not in data["runs"][0]
    # --events: every policy's log, each line tagged with its policy.
    lines = [json.loads(x) for x in (tmp_path / "ev.jsonl").read_text().splitlines()]
    for run in data["runs"]:
        mine = [x for x in lines if x["policy"] == run["policy"]]
        assert len(mine) == sum(run["events"].values()) > 0
    _, page = parse(out)
    headline = page.table("headline")
    assert [row[0] for row in headline[1:]] == ["static", "vpa", "foresize"]
    for row, run in zip(headline[1:], data["runs"], strict=True):
        assert row[1] == f"{run['totals']['cpu_requested_core_hours']:.2f}"
    # Per workload: a row per policy; risk and gap sections: one heading per policy.
    workloads = page.table("workloads")
    # (the workload cell spans its policies' rows)
    assert workloads[1][:2] == ["Deployment/default/steady", "static"]  # the largest first
    assert [workloads[2][0], workloads[3][0]] == ["vpa", "foresize"]
    text = (out / "index.html").read_text()
    for policy in ("static", "vpa", "foresize"):
        assert text.count(f"<h3>{policy}</h3>") == 2  # risk events and charge gap
    # The table printed without --json has a side-by-side block with all three.
    plain = run_cli("--scenario", tiny, "-d", "1h", "--compare", "static,vpa")
    assert "side by side" in plain
    block = plain.split("side by side")[1]
    assert "static" in block and "vpa" in block


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--report", "{file}"], "--report: {file} exists and is not a directory"),
        (["--report", "{file}/sub"], "--report: cannot create directory {file}/sub"),
        (["--report", "{ro}"], "--report: directory {ro} is not writable"),
        (["--compare", "static,magic"], "--compare: unknown policy 'magic'"),
        (["--compare", "static,,vpa"], "--compare: expected policy names"),
        (["--compare", "vpa,vpa"], "--compare: policy listed twice: vpa"),
        (["--compare", "static", "--policy", "vpa"], "--compare: give the policies there"),
        (["--report", "{dir}", "--gap-every", "0s"], "--gap-every: must be positive"),
    ],
)
def test_bad_report_and_compare_options_are_clear_errors(
    tmp_path, capsys, monkeypatch, args, needle
):
    from foresize.front.cli import main

    f = tmp_path / "a-file"
    f.write_text("x")
    ro = tmp_path / "ro"
    ro.mkdir()
    if "{ro}" in " ".join(args):
        # Root ignores directory permissions: make the probe write fail instead.
        real_write = type(ro).write_bytes

        def refuse(self, data):
            if self.parent == ro:
                raise PermissionError(13, "Permission denied", str(self))
            return real_write(self, data)

        monkeypatch.setattr(type(ro), "write_bytes", refuse)
        ro.chmod(0o500)
    subs = {"{file}": str(f), "{ro}": str(ro), "{dir}": str(tmp_path / "d")}

    def fill(s: str) -> str:
        for k, v in subs.items():
            s = s.replace(k, v)
        return s

    argv = ["foresize", "simulate", "-d", "10m", "--no-progress", *map(fill, args)]
    monkeypatch.setattr("sys.argv", argv)
    with pytest.raises(SystemExit) as exc:
        main()
    ro.chmod(0o700)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and fill(needle) in err, err
    assert "Traceback" not in err


def test_oom_kill_appears_in_the_risk_timeline_table(tiny, tmp_path):
    out = tmp_path / "rep"
    summary = json.loads(run_cli("--scenario", tiny, "-d", "3h", "--json", "--report", str(out)))
    _, page = parse(out)
    rows = page.table("timeline", "static")
    assert rows[0] == ["time", "event", "workload", "object", "message"]
    ooms = [r for r in rows[1:] if r[1] == "OOM kill"]
    assert len(ooms) == summary["totals"]["oom_kills"] >= 1
    first = ooms[0]
    assert first[2] == "Deployment/default/leaky" and first[3].startswith("Pod/default/leaky-")
    assert re.fullmatch(r"d0 0[0-2]:\d\d", first[0])
    assert "memory limit" in first[4] and "limit 1,024 MiB)" in first[4]  # usage, limit
    # The per-workload risk counts agree, and the steady workload has no risk row.
    counts = page.table("risk-counts")
    assert counts[0][1] == "OOM kill"
    leaky = next(r for r in counts if r[0] == "Deployment/default/leaky")
    assert int(leaky[1]) == len(ooms)
    assert not any(r[0] == "Deployment/default/steady" for r in counts)
    # Under the workload's own figures: its risk events per policy, first and last.
    wl_risks = page.table("wl-risks")
    static_row = next(r for r in wl_risks if r[0] == "static")
    assert f"{len(ooms)} × OOM kill" in static_row[1] and static_row[2] == first[0]


def test_recorded_series_integrate_to_the_summary_and_leave_the_run_unchanged():
    scenario = parse_scenario(TINY, "<tiny>")
    plain = SimCluster(scenario, seed=3)
    plain.run_until(3 * 3600)
    sim = SimCluster(scenario, seed=3)
    rec = UsageRecorder(sim).install()
    NodeGapSampler(sim, interval=300).install()
    sim.run_until(3 * 3600)
    assert sim.summary() == plain.summary()
    s = rec.series()
    assert s.names == ["Deployment/default/leaky", "Deployment/default/steady"]
    assert s.cpu_req.shape == (s.times.size, 2)
    dt = sim.step
    for row in sim.summary()["workloads"]:
        c = s.column(row["name"])
        # Each step's value holds until the next step (the last one is not integrated).
        integ = {
            "cpu_requested_core_hours": s.cpu_req[:-1, c].sum() * dt / 3600,
            "cpu_used_core_hours": s.cpu_used[:-1, c].sum() * dt / 3600,
            "memory_requested_gib_hours": s.mem_req[:-1, c].sum() * dt / 3600 / 2**30,
            "memory_used_gib_hours": s.mem_used[:-1, c].sum() * dt / 3600 / 2**30,
        }
        for key, value in integ.items():
            # The recorder sees usage as reported at the step, before that step's OOM kill
            # zeroes it; the summary integrates after. Only the leaky workload differs.
            rel = 0.05 if "used" in key and row["name"].endswith("leaky") else 0.01
            assert value == pytest.approx(row[key], rel=rel), (row["name"], key)
    # Two steady replicas at 500m: the per-workload sums are over pods, not one pod.
    assert s.cpu_req[5, s.column("Deployment/default/steady")] == pytest.approx(1.0)
    assert [e.label for e in risk_events(sim)].count("OOM kill") == sim.summary()["totals"][
        "oom_kills"
    ]


def _stuck_memory_downsize(sim: SimCluster, settle: float):
    """Workload a's first pod uses 700Mi and is resized to a 256Mi request at t=120 s: the
    kubelet cannot actuate a limit below live usage, so the node carries a 256Mi gap
    (charged at the old request, not the spec) from then on. Runs `settle` s after it."""
    pod = pods_of(sim, "a")[0]
    sim.set_usage("default", pod.name, "app", memory=700 * MIB)
    sim.run(120)
    resize = ContainerResize("app", {"memory": 256 * MIB}, {"memory": 600 * MIB})
    assert sim.apply(ResizePod("default", pod.name, (resize,))).ok
    sim.run(settle)
    return pod


def test_node_gap_sampler_sees_a_resize_stuck_below_live_usage():
    # A memory downsize below live usage is recorded as allocated but not actuated: the
    # scheduler keeps charging the old (larger) requests in force, above the spec.
    sim = make_sim([workload("a"), workload("b")], settle=30)
    sampler = NodeGapSampler(sim, interval=60).install()
    pod = _stuck_memory_downsize(sim, settle=300)
    gaps = sampler.gaps()
    col = gaps.nodes.index(pod.node_name or "")
    before = gaps.times < 150
    after = gaps.times > 160
    assert not gaps.memory[before].any() and not gaps.cpu.any()
    assert (gaps.memory[after, col] == 256 * MIB).all()
    # The identity cache agrees with computing every pod afresh.
    fresh = sum(pod_gap(p)[1] for p in sim.snapshot().pods if p.node_name == pod.node_name)
    assert fresh == gaps.memory[-1, col]


def test_gap_section_reports_the_node_and_its_largest_gap(tmp_path):
    from foresize.front.report.html import write_report
    from foresize.front.report.run import PolicyRun

    sim = make_sim([workload("a")], settle=30)
    rec = UsageRecorder(sim).install()
    sampler = NodeGapSampler(sim, interval=60).install()
    pod = _stuck_memory_downsize(sim, settle=600)
    run = PolicyRun("static", sim.summary(), rec.series(), sampler.gaps(), risk_events(sim), False)
    write_report(tmp_path, [run], duration=sim.now, gap_every=60)
    _, page = parse(tmp_path)
    rows = page.table("gap", "static")
    assert len(rows) == 2  # the header and the one node that had a gap
    node, cpu, _, _, mem, mem_pct, at, samples = rows[1]
    assert node == pod.node_name and cpu == "+0" and mem == "+256"
    assert mem_pct == f"{100 * 256 / (8 * 1024):.1f}%" and at.startswith("d0 00:0")
    assert samples.endswith(f"of {sampler.gaps().times.size}") and int(samples.split()[0]) >= 9
    assert "gap-static.png" in page.images and (tmp_path / "gap-static.png").stat().st_size > 8000


def test_long_lists_are_cut_with_a_note_and_quiet_or_unsampled_nodes_are_said(tmp_path):
    """The report's limits and empty cases: event rows past `max_event_rows` and workload
    figures past `max_workload_figures` are left out with a note saying how many; nodes
    that never had a gap are counted, and a run without gap samples says so."""
    from dataclasses import replace

    from foresize.front.report.html import write_report
    from foresize.front.report.recorder import RiskEvent
    from foresize.front.report.run import PolicyRun

    sim = make_sim([workload("a"), workload("b")], nodes=2, settle=30)
    rec = UsageRecorder(sim).install()
    sampler = NodeGapSampler(sim, interval=60).install()
    pod = _stuck_memory_downsize(sim, settle=600)
    gaps = sampler.gaps()
    assert len(gaps.nodes) == 2
    risks = [
        RiskEvent(60.0 * k, "OOM kill", "Deployment/default/a", f"Pod/default/{pod.name}", "", "")
        for k in range(5)
    ]
    sampled = PolicyRun("static", sim.summary(), rec.series(), gaps, risks, False)
    unsampled = replace(
        sampled,
        policy="vpa",
        gaps=replace(gaps, times=gaps.times[:0], cpu=gaps.cpu[:0], memory=gaps.memory[:0]),
    )
    write_report(
        tmp_path,
        [sampled, unsampled],
        duration=sim.now,
        gap_every=60,
        max_event_rows=2,
        max_workload_figures=1,
    )
    text, page = parse(tmp_path)
    assert len(page.table("timeline", "static")) == 1 + 2
    assert "3 more events not listed" in text
    assert "Figures for the 1 largest workloads by requested CPU and memory (1 more are in" in text
    assert len([img for img in page.images if img.startswith("wl-")]) == 2  # CPU and memory
    assert "1 other node(s) never had a gap." in text
    assert "<h3>vpa</h3><p>No samples.</p>" in text


def test_risk_events_attribute_evictions_stalls_and_breaker_openings_to_workloads():
    from foresize.core.cluster.actions import EmitEvent, EvictPod

    sim = make_sim([workload("a", replicas=2), workload("b")], settle=30)
    a0, a1 = pods_of(sim, "a")
    b0 = pods_of(sim, "b")[0]
    assert sim.apply(EvictPod("default", a0.name, target="default/a", reason="stalled")).ok
    # An upsize past the node's allocatable is Infeasible: a stall.
    up = ContainerResize("app", {"cpu": 5000}, {"cpu": 6000})
    assert sim.apply(ResizePod("default", b0.name, (up,))).ok
    sim.apply(
        EmitEvent("default", "Deployment", "a", "CircuitBreakerOpen", "evictions come back stale")
    )
    sim.run(30)
    got = [(r.label, r.workload, r.object) for r in risk_events(sim)]
    assert ("eviction", "Deployment/default/a", f"Pod/default/{a0.name}") in got
    assert ("stall", "Deployment/default/b", f"Pod/default/{b0.name}") in got
    assert ("breaker open", "Deployment/default/a", "Deployment/default/a") in got
    assert not any(o == f"Pod/default/{a1.name}" for _, _, o in got)
    eviction = next(r for r in risk_events(sim) if r.label == "eviction")
    assert eviction.message.endswith("(reason stalled, by target default/a)")
    # The same counts as the summary's.
    totals = sim.summary()["totals"]
    labels = [g[0] for g in got]
    assert labels.count("eviction") == totals["evictions"] == 1
    assert labels.count("stall") == totals["stalls"] == 1
    assert labels.count("breaker open") == totals["breaker_openings"] == 1


def test_node_gap_is_negative_while_a_resize_is_infeasible():
    # Infeasible: the scheduler leaves the spec out and charges what is allocated.
    sim = make_sim([workload("a")], settle=30)
    sampler = NodeGapSampler(sim, interval=60).install()
    pod = pods_of(sim, "a")[0]
    up = ContainerResize("app", {"cpu": 5000}, {"cpu": 6000})
    assert sim.apply(ResizePod("default", pod.name, (up,))).ok
    sim.run(200)
    gaps = sampler.gaps()
    col = gaps.nodes.index(pod.node_name or "")
    # Sampled at once, before the kubelet answers: the new spec is charged, the old
    # allocation is what the pod holds (a resize that has not landed shows).
    assert gaps.cpu[0, col] == 5000 - 500
    assert (gaps.cpu[1:, col] == -(5000 - 500)).all() and not gaps.memory.any()


def test_report_for_a_non_static_policy_prints_the_same_summary_and_runs_the_references(
    tiny, tmp_path
):
    out = tmp_path / "rep"
    args = ["--scenario", tiny, "-d", "2h", "--policy", "vpa", "--json"]
    with_report = json.loads(run_cli(*args, "--report", str(out)))
    assert with_report == json.loads(run_cli(*args))  # savings_vs_static included
    assert with_report["savings_vs_static"]["baseline"] == "static"
    _, page = parse(out)
    assert [row[0] for row in page.table("headline")[1:]] == ["vpa", "static (reference)"]


# The tiny scenario with memory resized by restarting the container: foresize's OOM
# remediation resizes the leaky worker within hours, and each resize restarts it.
RESTARTING = {
    **TINY,
    "workloads": [
        {
            **w,
            "containers": [
                {**c, "resize_policy": {"memory": "RestartContainer"}} for c in w["containers"]
            ],
        }
        for w in TINY["workloads"]
    ],
}


@pytest.fixture(scope="module")
def restarting_report(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("restarting")
    path = tmp / "restarting.yaml"
    path.write_text(yaml.safe_dump(RESTARTING))
    out = tmp / "rep"
    data = json.loads(
        run_cli("--scenario", str(path), "-d", "6h", "-o", "json",
                "--compare", "static,foresize", "--report", str(out))
    )  # fmt: skip
    return out, {run["policy"]: run for run in data["runs"]}


def test_headline_shows_restarts_caused_by_resizes_and_resizes_per_day(restarting_report):
    out, runs = restarting_report
    restarts = runs["foresize"]["totals"]["resize_restarts"]
    assert restarts >= 1 and runs["static"]["totals"]["resize_restarts"] == 0
    text, page = parse(out)
    headline = page.table("headline-counts")
    col = headline[0].index("restartsfrom resizes")  # the parser joins the <br> halves
    per_day = headline[0].index("resizesper day")
    row = next(r for r in headline[1:] if r[0] == "foresize")
    assert row[col] == str(restarts)
    assert row[per_day] == f"{runs['foresize']['totals']['resizes'] / 0.25:.1f}"  # 6 h
    assert f"with {restarts} container restarts caused by resizes" in text
    # Per workload in the headline: the leaky worker's restarts under foresize.
    risk = page.table("headline-risk")
    assert risk[0][:3] == ["workload", "policy", "restarts from resizes"]
    leaky = next(r for r in runs["foresize"]["workloads"] if r["name"].endswith("/leaky"))
    i = next(i for i, r in enumerate(risk) if r[0] == "Deployment/default/leaky")
    assert [risk[i][1], risk[i + 1][0]] == ["static", "foresize"]
    assert risk[i + 1][1] == str(leaky["resize_restarts"]) == str(restarts)
    # The risk events list them: no "No risk events" for a policy that restarted containers.
    timeline = page.table("timeline", "foresize")
    assert sum(r[1] == "resize restart" for r in timeline[1:]) == restarts
    assert "<p data-policy='foresize'>No risk events.</p>" not in text


def test_rows_no_policy_changed_are_explained(restarting_report):
    out, runs = restarting_report
    steady = [
        next(w for w in run["workloads"] if w["name"].endswith("/steady")) for run in runs.values()
    ]
    assert len({w["memory_requested_gib_hours"] for w in steady}) == 1  # unchanged by all
    text, _ = parse(out)
    assert (
        "Identical under every policy: Deployment/default/steady (no policy resized it in "
        "this run)."
    ) in text
    assert "Deployment/default/leaky (" not in text.split("Identical under every policy")[1]


def _chromium() -> str | None:
    import shutil

    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(_chromium() is None, reason="Debian's chromium is not installed")
def test_report_renders_in_headless_chromium_with_restarts_in_the_headline(
    restarting_report, tmp_path
):
    """The page as a browser shows it: the rendered DOM keeps the headline's restart
    count, and the screenshot has the window's size (docs/report.md has the command that
    makes one of the demo report for a person to look at)."""
    import subprocess

    out, runs = restarting_report
    flags = [
        _chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path / 'profile'}",
    ]
    url = (out / "index.html").as_uri()
    dom = subprocess.run(
        [*flags, "--dump-dom", url], capture_output=True, text=True, timeout=120
    ).stdout
    restarts = runs["foresize"]["totals"]["resize_restarts"]
    assert f"with {restarts} container restarts caused by resizes" in dom
    assert "Risk per workload" in dom
    shot = tmp_path / "report.png"
    subprocess.run(
        [*flags, f"--screenshot={shot}", "--window-size=1400,2400", url],
        capture_output=True,
        timeout=120,
    )
    assert png_size(shot.read_bytes()) == (1400, 2400)


LAYOUT_PROBE = """<script>
window.addEventListener('load', () => {
  const out = [];
  for (const t of document.querySelectorAll('table')) {
    const box = t.parentElement;
    out.push({cls: t.className, right: t.getBoundingClientRect().right,
              scroll: box.scrollWidth, client: box.clientWidth,
              viewport: document.documentElement.clientWidth});
  }
  const pre = document.createElement('pre');
  pre.id = 'layout';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"""


@pytest.mark.skipif(_chromium() is None, reason="Debian's chromium is not installed")
@pytest.mark.parametrize("width", [1280, 1920])
def test_no_report_table_overflows_the_page_in_headless_chromium(
    restarting_report, tmp_path, width
):
    """ux.md N6: at 1400 px the headline table's right columns sat behind a scrollbar, so
    a screenshot, a PDF or a printed ticket lost them. Every table of the page, laid out
    by Chromium at the window width, fits its box and the window (a copy of the page with
    a probe script reports the layout), and the screenshot
    a person would attach has the window's size."""
    import subprocess

    out, _ = restarting_report
    page = tmp_path / "index.html"
    for png in out.glob("*.png"):
        (tmp_path / png.name).write_bytes(png.read_bytes())
    html = (out / "index.html").read_text()
    page.write_text(html.replace("</body>", LAYOUT_PROBE + "</body>"))
    flags = [
        _chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        f"--user-data-dir={tmp_path / 'profile'}",
        f"--window-size={width},2400",
    ]
    dom = subprocess.run(
        [*flags, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120
    ).stdout
    found = re.search(r'<pre id="layout">(.*?)</pre>', dom)
    assert found, dom[-2000:]
    tables = json.loads(found.group(1).replace("&quot;", '"'))
    assert {"headline", "headline-counts", "workloads"} <= {t["cls"] for t in tables}
    for t in tables:
        assert t["scroll"] <= t["client"], (width, t)  # nothing behind a scrollbar
        assert t["right"] <= t["viewport"], (width, t)  # nor past the window's edge
    shot = tmp_path / "report.png"
    subprocess.run(
        [*flags, f"--screenshot={shot}", (out / "index.html").as_uri()],
        capture_output=True,
        timeout=120,
    )
    assert png_size(shot.read_bytes()) == (width, 2400)


def test_prices_give_each_policy_its_cost_and_saving(tiny, tmp_path):
    out = tmp_path / "cost"
    data = json.loads(
        run_cli("--scenario", tiny, "-d", "1h", "-o", "json", "--compare", "static,foresize",
                "--report", str(out), "--cpu-price", "0.04", "--memory-price", "0.005")
    )  # fmt: skip
    _, page = parse(out)
    rows = {r[0]: r for r in page.table("cost")[1:]}
    cost = {}
    for run in data["runs"]:
        t = run["totals"]
        cost[run["policy"]] = (
            t["cpu_requested_core_hours"] * 0.04 + t["memory_requested_gib_hours"] * 0.005
        )
        assert rows[run["policy"]][1] == f"{cost[run['policy']]:.2f}"
        assert rows[run["policy"]][2] == f"{cost[run['policy']] * 730:.2f}"  # 1 h run
    assert rows["foresize"][3] == f"{cost['static'] - cost['foresize']:.2f}"
    bad = CliRunner().invoke(app, ["simulate", "--cpu-price", "1"])
    assert str(bad.exception) == "--cpu-price and --memory-price go with --report"
