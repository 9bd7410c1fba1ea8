"""The kube shell on a shared history store that cannot be read whole (issue 26, Bad
input): no new suggestion and no horizontal decision from it, the HistoryIncomplete
condition on the target and `foresize_history_whole` at 0; once it reads whole again,
suggestions are made and the condition turns False (strict API server)."""

from __future__ import annotations

from foresize.adapters.history.metrics_server import HistorySink
from foresize.adapters.history.prometheus import PrometheusReader
from foresize.adapters.history.shared import SharedHistory
from foresize.core.vertical.guards import HISTORY_CONDITION
from foresize.shells.kube.api import KubeApi
from foresize.shells.kube.executor import KubeExecutor
from foresize.shells.kube.shell import KubeShell, Locked
from support.kube import base_state, pod, seed_base
from support.kube_objects import hpa, load_state
from support.traces import crane_samples

NOW = 1_780_000_000.0
DOWN = "cannot reach Prometheus at http://vm:8428: Connection refused"


def _target() -> dict:
    return {
        "apiVersion": "foresize.io/v1",
        "kind": "AIScaleTarget",
        "metadata": {"name": "web", "namespace": "shop", "finalizers": ["foresize.io/revert"]},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "vertical": {"mode": "recommendation"},
            "horizontal": {"mode": "autonomous", "minReplicas": 2, "maxReplicas": 20},
        },
    }


def _condition(apiserver) -> dict | None:
    status = apiserver.get("AIScaleTarget", "shop", "web").get("status", {})
    return next((c for c in status.get("conditions", []) if c["type"] == HISTORY_CONDITION), None)


async def test_a_history_that_is_not_whole_keeps_the_last_suggestions_and_says_so(apiserver):
    rs_uid = seed_base(apiserver)
    apiserver.seed(hpa(max_replicas=20, cpu_utilization=50))
    apiserver.seed(_target())
    for name in ("web-1", "web-2"):
        apiserver.seed(pod(name, "200m", rs_uid))
    state = base_state()
    load_state(apiserver, state)
    store = SharedHistory(PrometheusReader("http://vm:8428"))
    HistorySink(store).add_samples(crane_samples(2.0))  # days of usage in the mirror
    store.last_success = NOW
    store.failed(DOWN)  # the last read of the store failed
    api = KubeApi.from_url(apiserver.url)
    try:
        shell = KubeShell(
            state,
            KubeExecutor(api, pod_lookup=state.pod),
            clock=lambda: NOW,
            history=Locked(store),
        )
        await shell.run_pass()
        assert shell.metrics.history_whole._value.get() == 0
        status = apiserver.get("AIScaleTarget", "shop", "web").get("status", {})
        assert "vertical_suggestion" not in status and "horizontal_suggestion" not in status
        assert not apiserver.calls("PATCH", "/deployments/web/scale$")
        condition = _condition(apiserver)
        assert condition is not None and condition["status"] == "True"
        assert condition["reason"] == "HistoryStoreUnreadable"
        assert condition["message"].startswith(DOWN + "; the last suggestion stays in force")
        # A second pass with the same problem writes no condition again.
        writes = len(apiserver.calls("PATCH", "/aiscaletargets/web/status$"))
        await shell.run_pass()
        await shell.run_pass()
        later = apiserver.calls("PATCH", "/aiscaletargets/web/status$")
        assert all("conditions" not in r.body.get("status", {}) for r in later[writes:])
        # The store reads whole again: suggestions from it, the condition False.
        store.failure = None
        load_state(apiserver, state)
        await shell.run_pass()
    finally:
        await api.close()
    assert shell.metrics.history_whole._value.get() == 1
    status = apiserver.get("AIScaleTarget", "shop", "web")["status"]
    assert "vertical_suggestion" in status
    assert apiserver.calls("PATCH", "/deployments/web/scale$", code=200)
    condition = _condition(apiserver)
    assert condition is not None and condition["status"] == "False"
    assert condition["reason"] == "HistoryWhole"


def test_the_operator_reads_a_shared_store_and_only_shard_0s_holder_writes():
    from foresize.shells.kube.components import open_history
    from foresize.shells.kube.options import OperatorOptions

    class Shards:
        held = False

        def holds(self, shard: int) -> bool:
            return shard == 0 and self.held

    shards = Shards()
    store = open_history(OperatorOptions(history_store="http://vm:8428/"), None, shards)
    assert isinstance(store, SharedHistory)
    assert store.reader.url == "http://vm:8428" and store.reader.refuse_partial
    assert store.writer is not None and store.writer.url == "http://vm:8428/api/v1/write"
    assert not store.writes()
    shards.held = True
    assert store.writes()
    mimir = open_history(
        OperatorOptions(
            history_store="http://mimir/prometheus", history_store_write="http://mimir/api/v1/push"
        )
    )
    assert mimir.writer.url == "http://mimir/api/v1/push"
    read_only = open_history(OperatorOptions(history_store="http://thanos", history_store_write=""))
    assert read_only.writer is None


def test_bad_history_store_options_are_refused_naming_the_option():
    from typer.testing import CliRunner

    from foresize.core.errors import ForesizeError
    from foresize.front.cli import app

    cases = [
        (["--history-store", "vm:8428"], "--history-store: 'vm:8428' is not an http://"),
        (["--history-store", "http://vm", "--history-db", "/h.db"], "or --history-db, not both"),
        (["--history-store-write", "http://vm/w"], "--history-store-write needs --history-store"),
    ]
    for args, message in cases:
        result = CliRunner().invoke(app, ["operator", *args])
        assert isinstance(result.exception, ForesizeError), result.output
        assert message in str(result.exception)
