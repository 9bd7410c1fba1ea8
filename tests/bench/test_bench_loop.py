"""`foresize bench loop`: the real operator process on a synthetic cluster in the strict
test API server. A small run checks the whole path (list, pass, relist, the keys and what
they count); the synthetic cluster is checked to be the steady state it claims to be."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from foresize.bench.loop import measure
from foresize.bench.synthetic import resized_targets, seed, synthetic_objects
from foresize.core.errors import ForesizeError
from foresize.front.cli import app


def test_the_synthetic_cluster_is_an_operator_s_steady_state() -> None:
    import kopf

    from foresize.shells.kube.handlers import diffbase_storage
    from foresize.testing.apiserver import StrictApiServer

    server = StrictApiServer(seed=0)
    seed(server, synthetic_objects(25, 4, 3))
    assert server.validate  # on again for the operator's writes
    pods = server.list("Pod")
    assert len(pods) == 25 and len(server.list("Node")) == 3
    assert {p["spec"]["nodeName"] for p in pods} == {"node-00000", "node-00001", "node-00002"}
    storage = diffbase_storage()
    for target in server.list("AIScaleTarget"):
        # Kopf finds the spec it would handle already handled: no create or update
        # handler runs, nothing is written back.
        body = kopf.Body(target)
        assert storage.fetch(body=body) == storage.build(body=body)
        assert target["metadata"]["finalizers"] == ["foresize.io/revert"]
        assert {"type": "Accepted", "status": "True"}.items() <= target["status"]["conditions"][
            0
        ].items()
    # 25 pods over 4 targets: 7, 6, 6, 6; 10 resizes need the first two.
    assert resized_targets(25, 4, 10) == [("ns-0", "wl-0", 7), ("ns-1", "wl-1", 6)]


@pytest.mark.slow
async def test_a_small_run_lists_resizes_relists_and_reports_the_keys(tmp_path) -> None:
    doc = await measure(
        20, 4, 2, resizes=10, rate=10.0, baseline=False, workdir=tmp_path, interval=1.0
    )
    assert doc["problems"] == [], (tmp_path / "loop.log").read_text()[-3000:]
    keys = ["webhook_p99_ms", "renew_late_max_ms", "api_writes_per_resize", "rss_mib"]
    assert list(doc)[-4:] == keys  # the keys end the document
    assert doc["resizes"] == 10  # the two targets' pods, each once
    assert doc["writes"]["pods/resize"] == 10
    # Per resize: the resize, and each changed target's status once, or twice when the
    # resizes fall in the pass after the one that wrote it (1 s passes on a loaded
    # machine: seen as 4 status writes for the 10 resizes); never one a pod.
    assert doc["writes"]["aiscaletargets/status"] <= 4, doc["writes"]
    assert 1.0 <= doc["api_writes_per_resize"] <= 1.4, doc["writes"]
    assert doc["webhook_requests"] > 0 and doc["webhook_p99_ms"] is not None
    assert doc["renewals"] >= 2 and doc["renew_late_max_ms"] is not None
    assert doc["relist_seconds"] is not None and doc["rss_mib"] > 0
    by_phase = doc["rss_mib_by_phase"]
    assert {"start", "pass", "relist"} <= set(by_phase) and max(by_phase.values()) == doc["rss_mib"]
    assert (tmp_path / "requests.tsv").exists()
    # The round the run does not reach, measured after it: every target at once, or the
    # busiest pass of a cadence with the rounds spread (`bench.rounds`).
    assert doc["round_all_due_targets"] == 4
    assert 0 < doc["round_spread_targets"] < 4
    assert 0 < doc["round_spread_peak_kib_per_pod"] < doc["round_all_due_peak_kib_per_pod"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--pods", "0"], "--pods must be at least 1, got 0"),
        (["--pods", "10", "--targets", "20"], "--targets (20) must not exceed --pods (10)"),
        (
            ["--pods", "10", "--targets", "2", "--resizes", "11"],
            "--resizes must be in [1, --pods (10)], got 11",
        ),
        (
            ["--pods", "1000", "--targets", "10", "--nodes", "3"],
            "--nodes (3) is too few for 1000 pods (at most 250 a node)",
        ),
        (["--rate", "0"], "--rate must be in (0, 1000] reviews per second, got 0.0"),
    ],
)
def test_bad_sizes_are_refused_naming_the_option(args: list[str], message: str) -> None:
    result = CliRunner().invoke(app, ["bench", "loop", *args])
    assert isinstance(result.exception, ForesizeError), result.output
    assert str(result.exception) == message
