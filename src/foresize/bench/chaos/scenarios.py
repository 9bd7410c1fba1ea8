"""The fault scenarios of the real operator process, by name (`SCENARIOS`), and
`run_scenarios` (`foresize bench chaos`)."""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from foresize.bench.chaos.certificates import scenario_certificate, scenario_certificate_expired
from foresize.bench.chaos.cluster import (
    INTERVAL,
    LEASE_RETRY,
    RENEW_DEADLINE,
    TAKEOVER_SLACK,
    Cluster,
    OperatorProcess,
    ScenarioResult,
    lease_holder,
    wait_until,
)

# ------------------------------------------------------------------ scenarios

# How long a scenario waits for a fresh operator's first actions before its fault. It
# bounds start-up (interpreter, imports, Kopf, the first listing and pass), not what a
# scenario measures: on a loaded 2-core machine start-up alone was seen to pass 30 s, and a
# fault scenario that never got to its fault failed with an empty log ("never acted").
FIRST_ACTIONS_DEADLINE = 90.0


async def scenario_signal(
    sig: signal.Signals = signal.SIGTERM, *, workdir: Path | None = None
) -> ScenarioResult:
    """SIGTERM/SIGINT mid-pass: no action after the signal (one in flight at most),
    Lease released, exit 0 within 10 s, and the standby takes over within one retry
    period of the release (plus `TAKEOVER_SLACK`). seconds = signal to exit."""
    name = f"{sig.name.lower()} mid-pass"
    async with Cluster(pods=40, workdir=workdir) as c:
        # A slow client rate limit makes the pass long enough to be interrupted mid-way.
        slow = ["--kube-api-qps", "10", "--kube-api-burst", "2"]
        op = c.operator(args=slow)
        await op.start()
        acting = await wait_until(lambda: len(c.proxy.actions()) >= 3, FIRST_ACTIONS_DEADLINE)
        if not acting:
            return ScenarioResult(name, 0.0, False, problems=["never acted", op.output()[-2000:]])
        proxy_b = await c.new_proxy()
        standby = c.operator("b", proxy=proxy_b, args=slow)
        await standby.start()
        # The standby is up once it watches the Lease (twice: it has seen it stay held).
        await wait_until(
            lambda: sum("/leases" in e.path for e in proxy_b.log) >= 2, FIRST_ACTIONS_DEADLINE
        )
        problems = []
        if proxy_b.actions():
            problems.append("the standby acted while the leader held the Lease")
        sent = op.send(sig)
        code = await op.wait(15)
        took = (op.exited_at or time.monotonic()) - sent
        late = c.proxy.actions(since=sent + 0.1)
        released = next(
            (
                e.at
                for e in c.proxy.log
                if e.at > sent and e.method == "PATCH" and "/leases" in e.path
            ),
            None,
        )
        taken = await wait_until(lambda: lease_holder(c.k) == "b", 10)
        # When the standby's Lease write landed (its proxy's log), not when this check
        # noticed: the check runs after the leader's exit, which takes longer.
        won = next(
            (
                e.at
                for e in proxy_b.log
                if e.at > (released or sent)
                and e.method == "PATCH"
                and "/leases" in e.path
                and e.status == 200
            ),
            time.monotonic(),
        )
        took_over = won - (released or sent)
        if not taken:
            problems.append("the standby never took over")
        elif released is not None and took_over >= LEASE_RETRY + TAKEOVER_SLACK:
            # The standby's next round after the release wins: one retry period, plus
            # a GET and a PATCH on a loaded machine.
            problems.append(f"the standby took {took_over:.1f}s after the release")
        if code != 0:
            problems.append(f"exit code {code}")
        if took > 10:
            problems.append(f"exit took {took:.1f}s")
        if late:
            problems.append(
                f"{len(late)} action(s) after the signal: {late[0].method} {late[0].path}"
            )
        if released is None:
            problems.append("the Lease was not released")
        if op.leftovers():
            problems.append(f"left in its temp directory: {', '.join(op.leftovers())}")
        if hung := op.hung_shutdown():
            problems.append(f"the shutdown hung: {hung}")
        detail = (
            f"{len(c.proxy.actions(until=sent))} actions before the signal; standby leads "
            f"{took_over:.2f}s after the release"
        )
        return ScenarioResult(name, took, not problems, detail, problems)


async def scenario_outage_at_start(
    outage: float = 8.0, *, workdir: Path | None = None
) -> ScenarioResult:
    """The API unreachable for `outage` s at start (90 s in production, scaled): not
    ready meanwhile, alive, and acting within 30 s of the API's return.
    seconds = API back to first action."""
    name = f"API unreachable {outage:g}s at start"
    async with Cluster(pods=4, workdir=workdir) as c:
        await c.proxy.go_down()
        op = c.operator()
        await op.start()
        await asyncio.sleep(outage)
        problems = []
        ready = await op.probe("/readyz")
        if ready == 200:
            problems.append("ready while the API was unreachable")
        if not op.running:
            problems.append(f"exited during the outage: {op.output()[-1500:]}")
            return ScenarioResult(name, 0.0, False, problems=problems)
        await c.proxy.come_up()
        back = time.monotonic()
        acted = await wait_until(lambda: bool(c.proxy.actions(since=back)), 40)
        took = c.proxy.actions(since=back)[0].at - back if acted else 40.0
        if not acted or took > 30:
            problems.append(f"no action within 30 s of the API's return ({op.output()[-1500:]})")
        if not await wait_until(lambda: _probe_is(op, "/readyz", 200), 10):
            problems.append("never ready after the API came back")
        lists = [
            e for e in c.proxy.log if e.method == "GET" and e.at >= back and "watch" not in e.query
        ]
        first_action = c.proxy.actions(since=back)[0].at if acted else float("inf")
        listed = {e.path for e in lists if e.at < first_action}
        for path in (
            "/api/v1/pods",
            "/apis/apps/v1/deployments",
            "/apis/foresize.io/v1/aiscaletargets",
        ):
            if path not in listed:
                problems.append(f"acted before listing {path}")
        return ScenarioResult(
            name, took, not problems, f"ready={ready} during the outage", problems
        )


async def _probe_is(op: OperatorProcess, path: str, code: int) -> bool:
    return await op.probe(path) == code


async def scenario_watch_gone(*, workdir: Path | None = None) -> ScenarioResult:
    """Watches dropped, an object deleted meanwhile, the re-watch answered 410 Gone: the
    relist prunes it, and no call is made for it afterwards. seconds = drop to relist."""
    name = "watches dropped + 410 Gone"
    async with Cluster(pods=3, workdir=workdir) as c:
        op = c.operator()
        await op.start()
        if not await wait_until(lambda: len(c.proxy.actions()) >= 1, FIRST_ACTIONS_DEADLINE):
            return ScenarioResult(name, 0.0, False, problems=["never acted", op.output()[-2000:]])
        # Watches drop and stay away while the pod is deleted and the server forgets the
        # versions (a control-plane restart): the resumed watch is answered 410 Gone.
        c.proxy.hold_watches = True
        dropped = time.monotonic()
        c.proxy.drop_watches()
        c.k.drop_watches()
        await asyncio.sleep(0.2)
        c.k.delete("Pod", "shop", "web-2")
        c.k.expire_resource_versions(notify=False)
        c.proxy.hold_watches = False
        relisted = await wait_until(
            lambda: any(
                e.path == "/api/v1/pods" and "watch" not in e.query and e.at > dropped
                for e in c.proxy.log
            ),
            20,
        )
        took = time.monotonic() - dropped
        await asyncio.sleep(3 * INTERVAL)
        problems = []
        if not relisted:
            problems.append("no relist after 410")
        if "left the cache" not in op.output():
            problems.append("the deleted pod stayed in the cache")
        # Writes only: a pass planned before the relist may still look the pod up (GET,
        # 404) but must not resize or evict it.
        ghost = [e for e in c.proxy.actions(since=dropped + took) if "/pods/web-2" in e.path]
        if ghost:
            problems.append(
                f"{len(ghost)} call(s) for the deleted pod: {ghost[0].method} {ghost[0].path}"
            )
        if not op.running:
            problems.append("the process exited")
        return ScenarioResult(name, took, not problems, "", problems)


async def scenario_storm(duration: float = 6.0, *, workdir: Path | None = None) -> ScenarioResult:
    """Half of all calls answered 429 (Retry-After: 1) or 500 for `duration` s: the
    operator stays up, keeps under its client rate limit, and its writes land after the
    storm. seconds = storm end to the first successful action."""
    name = f"429/500 storm ({duration:g}s, half of all calls)"
    qps, burst = 10.0, 5
    async with Cluster(pods=10, workdir=workdir) as c:
        c.proxy.error_rate = 0.5
        started = time.monotonic()
        op = c.operator(args=["--kube-api-qps", str(qps), "--kube-api-burst", str(burst)])
        await op.start()
        await asyncio.sleep(duration)
        c.proxy.error_rate = 0.0
        ended = time.monotonic()
        acted = await wait_until(lambda: bool(c.proxy.actions(since=ended)), 20)
        took = c.proxy.actions(since=ended)[0].at - ended if acted else 20.0
        problems = []
        if not op.running:
            problems.append("the process exited")
        storm = [e for e in c.proxy.log if started <= e.at <= ended and "watch" not in e.query]
        # The client-side limit covers Foresize's own client; Kopf has its own, and the
        # Lease calls are exempt (they must not queue behind a pass).
        limited = [e for e in storm if "kopf" not in e.agent and "/leases" not in e.path]
        peak = max(
            (sum(1 for e in limited if t <= e.at < t + 1.0) for t in (e.at for e in limited)),
            default=0,
        )
        if peak > qps + burst:
            problems.append(f"{peak} requests in one second (limit {qps:g}/s, burst {burst})")
        failed = sum(1 for e in storm if e.status >= 429)
        if not acted and not c.proxy.actions(since=started):
            problems.append("no write landed")
        created = sum(1 for e in c.proxy.log if e.method == "POST" and e.path.endswith("/events"))
        bumped = sum(1 for e in c.proxy.log if e.method == "PATCH" and "/events/" in e.path)
        detail = (
            f"{len(storm)} requests in the storm, {failed} refused, peak {peak}/s; "
            f"Events: {created} created, {bumped} count bumps"
        )
        return ScenarioResult(name, took, not problems, detail, problems)


async def scenario_token_rotation(*, workdir: Path | None = None) -> ScenarioResult:
    """The token file changes and the old token gets 401: the operator's own calls and
    Kopf's both carry on with the new one. seconds = rotation to the first successful
    call with the new token from each (the later of the two)."""
    name = "token rotation"
    async with Cluster(pods=3, workdir=workdir) as c:
        token = c.workdir / "token"
        token.write_text("token-1")
        c.proxy.token = "token-1"
        kubeconfig = c.workdir / "kubeconfig"
        kubeconfig.write_text(
            json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "c", "cluster": {"server": c.proxy.url}}],
                    "users": [{"name": "u", "user": {"tokenFile": str(token)}}],
                    "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                    "current-context": "x",
                }
            )
        )
        op = OperatorProcess(c.workdir, "a", server=None, args=["--kubeconfig", str(kubeconfig)])
        c.processes.append(op)
        await op.start()
        problems = []
        kopf_seen = await wait_until(
            lambda: any("kopf" in e.agent and e.status == 200 for e in c.proxy.log),
            FIRST_ACTIONS_DEADLINE,
        )
        if not kopf_seen or not await wait_until(
            lambda: bool(c.proxy.actions()), FIRST_ACTIONS_DEADLINE
        ):
            return ScenarioResult(name, 0.0, False, problems=["never started", op.output()[-2000:]])
        token.write_text("token-2")
        c.proxy.token = "token-2"
        rotated = time.monotonic()
        c.proxy.drop_watches()  # e.g. an API server restart: everyone reconnects

        def first_ok(kopf: bool) -> float | None:
            for e in c.proxy.log:
                new = e.at > rotated and e.status < 400 and e.auth == "Bearer token-2"
                if new and ("kopf" in e.agent) == kopf:
                    return e.at
            return None

        both = await wait_until(lambda: bool(first_ok(True) and first_ok(False)), 30)
        took = max(first_ok(True) or 0.0, first_ok(False) or 0.0) - rotated
        if not both:
            problems.append(
                f"new token used by kopf={first_ok(True) is not None} "
                f"lightkube={first_ok(False) is not None}"
            )
        if not op.running:
            problems.append(f"the process exited: {op.output()[-1500:]}")
        if "Ran out of valid credentials" in op.output():
            problems.append("Kopf ran out of credentials")
        return ScenarioResult(name, took if both else 30.0, not problems, "", problems)


async def scenario_leader_loss(*, workdir: Path | None = None) -> ScenarioResult:
    """Two replicas; the leader's Lease renewals start failing: it stops acting within its
    renew deadline, the standby takes over, and the two never act at the same time.
    seconds = first failed renewal to the old leader's last action."""
    name = "Lease renewals fail (two replicas)"
    async with Cluster(pods=6, workdir=workdir) as c:
        proxy_b = await c.new_proxy()
        a = c.operator("a")
        await a.start()
        if not await wait_until(
            lambda: lease_holder(c.k) == "a" and bool(c.proxy.actions()), FIRST_ACTIONS_DEADLINE
        ):
            return ScenarioResult(name, 0.0, False, problems=["a never led", a.output()[-2000:]])
        b = c.operator("b", proxy=proxy_b)
        await b.start()
        await asyncio.sleep(2.0)
        problems = []
        if proxy_b.actions():
            problems.append("the standby acted while the leader held the Lease")
        c.proxy.fail = lambda method, path, body: 500 if "/leases" in path else None
        failing = time.monotonic()
        took_over = await wait_until(lambda: lease_holder(c.k) == "b", 20)
        await asyncio.sleep(1.0)
        a_actions = c.proxy.actions()
        last_a = max((e.at for e in a_actions), default=failing)
        first_b = min((e.at for e in proxy_b.actions()), default=float("inf"))
        took = max(0.0, last_a - failing)
        if not took_over:
            problems.append("the standby never took the Lease over")
        if took > RENEW_DEADLINE + 0.5:
            problems.append(f"the old leader acted {took:.1f}s after its renewals failed")
        if first_b < last_a:
            problems.append("both replicas acted at once")
        detail = f"standby's first action {first_b - failing:.1f}s after the failure"
        return ScenarioResult(name, took, not problems, detail, problems)


async def scenario_kopf_dies(*, workdir: Path | None = None) -> ScenarioResult:
    """Kopf's watch gets a fatal error (a non-410 ERROR event): Kopf stops, and the
    process must exit non-zero so Kubernetes restarts it (before, the replica kept its
    Lease with a dead Kopf and said healthy). seconds = fault to exit."""
    name = "Kopf dies"
    async with Cluster(pods=2, workdir=workdir) as c:
        op = c.operator()
        await op.start()
        if not await wait_until(lambda: bool(c.proxy.actions()), FIRST_ACTIONS_DEADLINE):
            return ScenarioResult(name, 0.0, False, problems=["never acted", op.output()[-2000:]])
        c.proxy.fatal_watch_agent = "kopf"
        broke = time.monotonic()
        c.proxy.drop_watches()
        code = await op.wait(30)
        took = (op.exited_at or time.monotonic()) - broke
        problems = []
        if code is None:
            problems.append("still running 30 s after Kopf died")
        elif code == 0:
            problems.append("exit code 0 after a failure")
        if code is not None and op.leftovers():
            problems.append(f"left in its temp directory: {', '.join(op.leftovers())}")
        if hung := op.hung_shutdown():  # exit 1 as well, but not the orderly one
            problems.insert(0, f"the shutdown hung: {hung}")
        if problems:  # the process's own account, for a failure seen once under load
            problems.append(op.output()[-3000:])
        return ScenarioResult(name, took, not problems, f"exit code {code}", problems)


async def scenario_templates_before_workloads(
    hold: float = 4.0, *, workdir: Path | None = None
) -> ScenarioResult:
    """A ClusterAIScaleTemplate and the AIScaleTarget it made are listed, the Deployments
    only `hold` s later: nothing is written (above all, the target is not deleted and its
    pods are not reverted) until every cache has synced. seconds = Deployments listed to
    the first write."""
    from foresize.core.api.types import ClusterAIScaleTemplate

    name = "templates listed before workloads"
    async with Cluster(pods=2, target=False, workdir=workdir) as c:
        template = {
            "apiVersion": "foresize.io/v1",
            "kind": "ClusterAIScaleTemplate",
            "metadata": {"name": "fleet"},
            "spec": {
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "spec": {
                        "vertical": {
                            "mode": "recommendation",
                            "containers": [{"name": "*", "cpu": {"lowerbound": "10m"}}],
                        }
                    }
                },
            },
        }
        c.k.seed(template)
        made = ClusterAIScaleTemplate.model_validate(template).spec.build_target(
            "Deployment", "web", "shop", "fleet"
        )
        body = made.model_dump(by_alias=True, exclude_none=True, mode="json")
        c.k.seed(body)
        listed_at = time.monotonic() + hold
        c.proxy.hold_lists["/apis/apps/v1/deployments"] = listed_at
        op = c.operator()
        await op.start()
        await wait_until(lambda: time.monotonic() > listed_at + 3.0, hold + 30)
        problems = []
        early = c.proxy.actions(until=listed_at)
        if early:
            problems.append(f"{len(early)} write(s) before the Deployments were listed")
        deletes = [e for e in c.proxy.log if e.method == "DELETE" and "aiscaletargets" in e.path]
        if deletes:
            problems.append(f"deleted {deletes[0].path}")
        if c.k.get("AIScaleTarget", "shop", body["metadata"]["name"]) is None:
            problems.append("the template-made target is gone")
        if not op.running:
            problems.append(f"the process exited: {op.output()[-1500:]}")
        later = c.proxy.actions(since=listed_at)
        took = later[0].at - listed_at if later else 0.0
        return ScenarioResult(name, took, not problems, f"{len(later)} writes after sync", problems)


# name -> the scenario, run with its cluster's files in the folder given (None: a
# temporary folder, removed after).
SCENARIOS: dict[str, Callable[[Path | None], Awaitable[ScenarioResult]]] = {
    "sigterm": lambda w: scenario_signal(signal.SIGTERM, workdir=w),
    "sigint": lambda w: scenario_signal(signal.SIGINT, workdir=w),
    "outage": lambda w: scenario_outage_at_start(workdir=w),
    "watch-gone": lambda w: scenario_watch_gone(workdir=w),
    "storm": lambda w: scenario_storm(workdir=w),
    "token": lambda w: scenario_token_rotation(workdir=w),
    "leader": lambda w: scenario_leader_loss(workdir=w),
    "kopf-dies": lambda w: scenario_kopf_dies(workdir=w),
    "templates": lambda w: scenario_templates_before_workloads(workdir=w),
    "certificate": lambda w: scenario_certificate(workdir=w),
    "certificate-cert-manager": lambda w: scenario_certificate(cert_manager=True, workdir=w),
    "certificate-expired": lambda w: scenario_certificate_expired(workdir=w),
}


async def run_scenarios(names: list[str] | None = None, keep: Path | None = None) -> dict[str, Any]:
    """Each scenario with its files (the processes' logs and temp directories) in a folder
    of its own: a passing scenario's is removed, a failed one's kept as its evidence (the
    path is in its problems). `keep`: put every scenario's folder there and keep them all."""
    results = []
    for name in names or list(SCENARIOS):
        if keep is not None:
            workdir = keep / name
            workdir.mkdir(parents=True, exist_ok=True)
        else:
            workdir = Path(tempfile.mkdtemp(prefix=f"foresize-chaos-{name}-"))
        started = time.monotonic()
        try:
            result = await SCENARIOS[name](workdir)
        except Exception as exc:  # a broken scenario is a violation, not a crash
            result = ScenarioResult(name, time.monotonic() - started, False, problems=[repr(exc)])
        if keep is None and result.ok:
            shutil.rmtree(workdir, ignore_errors=True)
        elif not result.ok:
            result.problems.append(f"logs kept in {workdir}")
        results.append(result)
    return {
        "scenarios": len(results),
        "violations": sum(1 for r in results if not r.ok),
        "results": [r.to_json() for r in results],
    }
