"""Fault tests of the REAL process: `foresize operator` as a subprocess against the strict
API server behind a fault-injecting proxy (`foresize.bench.chaos`). Each scenario's invariant is
checked from the proxy's request log and the process's exit; see the scenario docstrings.
Intervals are short through the operator's own flags (Lease 3 s, renew deadline 2 s,
pass every 0.5 s; the 90 s outage at start is scaled to 5 s)."""

from __future__ import annotations

import signal
import socket
import tempfile

import pytest

from foresize.bench import chaos
from foresize.bench.chaos.cluster import wait_until


@pytest.mark.slow
@pytest.mark.parametrize(
    "scenario",
    [
        lambda w: chaos.scenario_signal(signal.SIGTERM, workdir=w),
        lambda w: chaos.scenario_signal(signal.SIGINT, workdir=w),
        lambda w: chaos.scenario_outage_at_start(outage=5.0, workdir=w),
        lambda w: chaos.scenario_watch_gone(workdir=w),
        lambda w: chaos.scenario_storm(duration=4.0, workdir=w),
        lambda w: chaos.scenario_token_rotation(workdir=w),
        lambda w: chaos.scenario_leader_loss(workdir=w),
        lambda w: chaos.scenario_kopf_dies(workdir=w),
        lambda w: chaos.scenario_templates_before_workloads(workdir=w),
        lambda w: chaos.scenario_certificate(workdir=w),
        lambda w: chaos.scenario_certificate(cert_manager=True, workdir=w),
        lambda w: chaos.scenario_certificate_expired(workdir=w),
    ],
    ids=[
        "sigterm",
        "sigint",
        "outage-at-start",
        "watch-gone",
        "storm",
        "token",
        "leader",
        "kopf-dies",
        "templates-before-workloads",
        "certificate-near-expiry",
        "certificate-renewed-by-cert-manager",
        "certificate-expired",
    ],
)
async def test_scenario_keeps_its_invariant(scenario, tmp_path):
    # The processes' logs and temp directories in tmp_path: pytest keeps a failed test's.
    result = await scenario(tmp_path)
    assert result.ok, result.to_json()


TLS_SECRET = ["--tls-secret", "foresize-webhook-tls"]


async def test_a_stopped_operator_leaves_no_webhook_key_behind(tmp_path):
    # The real process, serving its webhooks over TLS from the shared Secret (created at
    # start), with a TMPDIR of its own. No copy of the private key is on disk while it
    # serves (so not after SIGKILL or a hung shutdown's forced exit either), nor after
    # SIGTERM.
    async with chaos.Cluster(pods=1, workdir=tmp_path) as c:
        op = c.operator(args=TLS_SECRET, webhook=True)
        await op.start()
        serving = await wait_until(lambda: _serves_tls(op.webhook_port), 30, step=0.2)
        assert serving, op.output()[-2000:]
        assert op.leftovers() == []
        op.send(signal.SIGTERM)
        assert await op.wait(20) == 0, op.output()[-2000:]
        assert op.leftovers() == []


async def test_an_operator_that_cannot_start_leaves_no_webhook_key_behind(tmp_path):
    # The certificate is loaded, then the webhook port is found taken: exit 1, and the key
    # written for the load is gone.
    async with chaos.Cluster(pods=1, workdir=tmp_path) as c:
        op = c.operator(args=TLS_SECRET, webhook=True)
        with socket.socket() as taken:
            taken.bind(("0.0.0.0", op.webhook_port))
            taken.listen()
            await op.start()
            code = await op.wait(30)
        assert code == 1, op.output()[-2000:]
        assert "operator failed to start" in op.output()
        assert c.k.get("Secret", "foresize", "foresize-webhook-tls") is not None  # it had one
        assert op.leftovers() == []


async def _serves_tls(port: int) -> bool:
    return await chaos.served_certificate(port) is not None


async def test_a_cluster_removes_the_temporary_folder_it_made(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    async with chaos.Cluster(pods=1) as c:
        (c.workdir / "a.log").write_text("the operator's log")
        assert c.workdir.parent == tmp_path
    assert list(tmp_path.iterdir()) == []


async def test_run_scenarios_keeps_the_files_of_a_failed_scenario_only(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))

    def scenario(ok: bool):
        async def run(workdir):
            (workdir / "a.log").write_text("the operator's log")
            return chaos.ScenarioResult("x", 0.0, ok)

        return run

    monkeypatch.setitem(chaos.SCENARIOS, "passes", scenario(True))
    monkeypatch.setitem(chaos.SCENARIOS, "fails", scenario(False))
    report = await chaos.run_scenarios(["passes", "fails"])
    (kept,) = tmp_path.iterdir()  # the failed one's: its log is the evidence
    assert kept.name.startswith("foresize-chaos-fails-")
    assert (kept / "a.log").read_text() == "the operator's log"
    assert report["results"][1]["problems"] == [f"logs kept in {kept}"]
    everything = await chaos.run_scenarios(["passes", "fails"], keep=tmp_path / "all")
    assert everything["violations"] == 1
    assert sorted(p.name for p in (tmp_path / "all").iterdir()) == ["fails", "passes"]


def test_a_forced_exit_or_tasks_left_after_the_shutdown_are_a_hung_shutdown(tmp_path):
    # Kopf dying ends in exit 1 either way: the log tells the orderly exit from the forced
    # one, which the scenarios count as a violation.
    op = chaos.OperatorProcess(tmp_path, "a", server=None, args=[])
    op.log_path.write_text("INFO foresize.operator: stopping\n")
    assert op.hung_shutdown() is None
    op.log_path.write_text("stopping\nTimeout (0:00:15)!\nThread 0x7f (most recent call first):\n")
    assert op.hung_shutdown() == "Timeout (0:00:15)!\nThread 0x7f (most recent call first):\n"
    left = "ERROR foresize.operator: still running after the shutdown (the exit may hang): x\n"
    op.log_path.write_text("stopping\n" + left)
    assert op.hung_shutdown() == left
