"""Fuzzing (hypothesis, derandomized and bounded): whatever arrives, the webhook answers a
valid AdmissionReview with the request's uid and every patch applies and keeps the pod's
QoS class; every parser and file reader either accepts or refuses with one clear error,
never another exception."""

from __future__ import annotations

import base64
import copy
import json
import time
from typing import Any

import jsonpatch
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from foresize.core.admission.index import AdmissionIndex
from foresize.core.admission.review import review_pod, review_scale, review_target
from foresize.core.admission.validate import validate_target
from foresize.core.api.cron import cron_error
from foresize.core.api.duration import DurationError, parse_duration
from foresize.core.api.quantity import QuantityError, parse_quantity
from foresize.core.api.types import parse_object
from foresize.core.errors import ForesizeError
from foresize.shells.sim.scenario import parse_scenario
from support.admission import pod_json, review, scale_review, target_manifest

_SETTINGS = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
UID = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"

SUGGESTION = {
    "app": {"requests": {"cpu": "250m", "memory": "256Mi"}},
    "sidecar": {"requests": {"cpu": "50m", "memory": "64Mi"}},
}
INDEX = AdmissionIndex.build(
    [
        target_manifest("web", ref="web", vmode="autonomous", suggestion=SUGGESTION),
        target_manifest(
            "front",
            ref="front",
            vmode="recommendation",
            hmode="autonomous",
            predicted=6,
            min_replicas=1,
            max_replicas=20,
        ),
    ]
)

# --- strategies ------------------------------------------------------------------------

CPU = st.sampled_from(["10m", "100m", "250m", "0.5", "1", "2", "1500m", "1e-1", ".5"])
MEMORY = st.sampled_from(["16Mi", "64Mi", "128Mi", "512Mi", "1Gi", "0.5Gi", "1e9", "1G"])


@st.composite
def resources(draw: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kind in ("requests", "limits"):
        values = {}
        if draw(st.booleans()):
            values["cpu"] = draw(CPU)
        if draw(st.booleans()):
            values["memory"] = draw(MEMORY)
        if draw(st.integers(0, 5)) == 0:
            values["ephemeral-storage"] = "1Gi"
        if draw(st.integers(0, 8)) == 0:
            values["nvidia.com/gpu"] = "1"
        if values:
            out[kind] = values
    # What reaches admission is defaulted and (once validated) consistent: a limit without
    # a request gets the limit as its request, and a request above its limit is refused.
    limits, requests = out.get("limits", {}), out.setdefault("requests", {})
    for name, limit in limits.items():
        if name not in requests or (
            name in ("cpu", "memory") and parse_quantity(requests[name]) > parse_quantity(limit)
        ):
            requests[name] = limit
    if not requests:
        del out["requests"]
    return out


@st.composite
def pods(draw: Any) -> dict[str, Any]:
    names = draw(
        st.lists(
            st.sampled_from(["app", "sidecar", "log", "db"]), min_size=1, max_size=4, unique=True
        )
    )
    containers = [{"name": n, "image": "x", "resources": draw(resources())} for n in names]
    pod = pod_json(containers=containers)
    if draw(st.booleans()):
        pod["spec"]["initContainers"] = [
            {"name": "init", "image": "x", "resources": draw(resources())}
        ]
        if draw(st.booleans()):
            pod["spec"]["initContainers"][0]["restartPolicy"] = "Always"  # a native sidecar
    if draw(st.integers(0, 3)) == 0:
        pod["metadata"]["ownerReferences"][0]["name"] = "front-7c9d"
    return pod


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=20,
)

# --- an independent QoS computation (Kubernetes' qos.go rules) ---------------------------


def qos(pod: dict[str, Any]) -> str:
    spec = pod["spec"]
    every = list(spec.get("containers", [])) + list(spec.get("initContainers", []))
    guaranteed = True
    any_set = False
    for c in every:
        res = c.get("resources") or {}
        req = {k: v for k, v in (res.get("requests") or {}).items() if k in ("cpu", "memory")}
        lim = {k: v for k, v in (res.get("limits") or {}).items() if k in ("cpu", "memory")}
        any_set = any_set or bool(req) or bool(lim)
        for name in ("cpu", "memory"):
            if name not in lim or parse_quantity(req.get(name, lim[name])) != parse_quantity(
                lim[name]
            ):
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def _envelope(answer: dict[str, Any], uid: str) -> dict[str, Any]:
    assert answer["apiVersion"] == "admission.k8s.io/v1" and answer["kind"] == "AdmissionReview"
    response = answer["response"]
    assert response["uid"] == uid
    json.dumps(answer, allow_nan=False)  # strict JSON, as the API server parses it
    return response


# --- AdmissionReviews --------------------------------------------------------------------


@_SETTINGS
@given(pods(), st.sampled_from(["CREATE", "UPDATE"]))
def test_every_pod_answer_is_valid_and_every_patch_applies_and_keeps_qos(pod, operation):
    body = review(pod, uid=UID, operation=operation, old=pod if operation == "UPDATE" else None)
    response = _envelope(review_pod(body, INDEX, 0.0), UID)
    assert response["allowed"] is True
    if "patch" not in response:
        return
    assert response["patchType"] == "JSONPatch"
    ops = json.loads(base64.b64decode(response["patch"]))
    patched = jsonpatch.apply_patch(copy.deepcopy(pod), ops)
    assert qos(patched) == qos(pod)
    for before, after in zip(pod["spec"]["containers"], patched["spec"]["containers"], strict=True):
        # Only cpu/memory change; no request/limit key appears or disappears.
        old, new = before.get("resources") or {}, after.get("resources") or {}
        for kind in ("requests", "limits"):
            assert set(old.get(kind) or {}) == set(new.get(kind) or {})
            for name, value in (old.get(kind) or {}).items():
                if name not in ("cpu", "memory"):
                    assert new[kind][name] == value
        req, lim = new.get("requests") or {}, new.get("limits") or {}
        for name in set(req) & set(lim) & {"cpu", "memory"}:
            assert parse_quantity(req[name]) <= parse_quantity(lim[name])


@_SETTINGS
@given(JSON, st.sampled_from(["pods", "scale", "targets"]))
def test_garbage_reviews_are_answered_with_their_uid(garbage, endpoint):
    bodies = [
        garbage,
        {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": garbage},
        {"request": {"uid": UID, "object": garbage, "operation": "CREATE"}},
        review(garbage if isinstance(garbage, dict) else {"spec": garbage}, uid=UID),
    ]
    fn = {"pods": review_pod, "scale": review_scale, "targets": review_target}[endpoint]
    for body in bodies:
        request = body.get("request") if isinstance(body, dict) else None
        uid = request.get("uid") if isinstance(request, dict) else None
        response = _envelope(fn(body, INDEX, 0.0), uid if isinstance(uid, str) else "")
        assert response["allowed"] is True or endpoint == "targets"


@_SETTINGS
@given(st.integers(-5, 500), st.sampled_from(["web", "front", "other"]))
def test_every_scale_answer_is_valid(replicas, name):
    body = scale_review(name, replicas)
    response = _envelope(review_scale(body, INDEX, 0.0), body["request"]["uid"])
    assert response["allowed"] is True


# --- CRs -----------------------------------------------------------------------------------

FIELDS = st.sampled_from(
    [
        ("spec", "vertical", "mode"),
        ("spec", "vertical", "containers"),
        ("spec", "model", "forecast_cron"),
        ("spec", "model", "forecast_blocks"),
        ("spec", "model", "mode"),
        ("spec", "scaleTargetRef"),
        ("spec", "horizontal"),
        ("metadata", "name"),
        ("spec", "vertical", "update_policy"),
    ]
)


@_SETTINGS
@given(st.lists(st.tuples(FIELDS, JSON), max_size=3))
def test_mutated_targets_are_accepted_or_refused_with_field_errors(mutations):
    obj = target_manifest("web", ref="web")
    obj.pop("status", None)
    for path, value in mutations:
        node = obj
        for key in path[:-1]:
            if not isinstance(node.get(key), dict):
                node[key] = {}
            node = node[key]
        node[path[-1]] = value
    try:
        parse_object(obj, "t.yaml")
    except ForesizeError as exc:
        assert all(line.startswith("t.yaml") for line in str(exc).splitlines())
    problems = validate_target(obj)  # the webhook's checks: a list, never an exception
    assert all(isinstance(p, str) for p in problems)


# --- the one parser per concept ----------------------------------------------------------

HOSTILE = st.one_of(
    st.text(max_size=40),
    st.text(alphabet="0123456789.eE+-mkKMGiTPn", max_size=120),
    st.integers(1, 50_000).map(lambda n: "1" * n + "x"),
)


@_SETTINGS
@given(HOSTILE)
def test_quantity_durations_and_cron_answer_fast_or_refuse_cleanly(text):
    for parse, error in ((parse_quantity, QuantityError), (parse_duration, DurationError)):
        start = time.perf_counter()
        try:
            parse(text)
        except error as exc:
            assert len(str(exc)) < 200  # never the whole input echoed back
        assert time.perf_counter() - start < 0.05
    problem = cron_error(text)
    assert problem is None or len(problem) < 200


# --- trace rows --------------------------------------------------------------------------

NUMBER = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["", "nan", "-0", "1e308", "1e-320", "abc", " 1 ", "0x10"]),
    st.integers(-10, 10**12).map(str),
)


@_SETTINGS
@given(st.lists(st.tuples(NUMBER, NUMBER, NUMBER), min_size=1, max_size=20))
def test_trace_rows_are_read_or_counted_never_absurd(tmp_path_factory, rows):
    import numpy as np

    from foresize.adapters.history.traces import ReadReport, read_canonical_csv
    from foresize.core.api.quantity import MAX_PLAUSIBLE_CORES, MAX_PLAUSIBLE_MEMORY_BYTES

    path = tmp_path_factory.mktemp("t") / "c.csv"
    lines = ["timestamp,namespace,workload,pod,container,cpu_cores,memory_bytes"]
    lines += [f"{t},ns,web,p,app,{c},{m}" for t, c, m in rows]
    path.write_text("\n".join(lines) + "\n")
    report = ReadReport()
    try:
        series = read_canonical_csv(path, report)
    except ForesizeError:
        return
    assert report.rows == len(rows)
    for s in series:
        cpu = s.cpu[~np.isnan(s.cpu)]
        assert ((cpu >= 0) & (cpu <= MAX_PLAUSIBLE_CORES)).all()
        if s.memory is not None:
            mem = s.memory[~np.isnan(s.memory)]
            assert ((mem >= 0) & (mem <= MAX_PLAUSIBLE_MEMORY_BYTES)).all()


# --- scenarios -----------------------------------------------------------------------------


@_SETTINGS
@given(
    st.dictionaries(
        st.sampled_from(["nodes", "workloads", "seed", "name", "hpas", "autoscaler", "x"]),
        JSON,
        max_size=4,
    )
)
def test_scenarios_are_built_or_refused_with_one_line(data):
    try:
        parse_scenario(data, "s.yaml")
    except ForesizeError as exc:
        message = str(exc)
        assert message.startswith("s.yaml") and len(message.splitlines()) == 1


@pytest.mark.parametrize("count", [0, -1, 10**9])
def test_a_node_count_out_of_range_is_one_line(count):
    data = {"nodes": [{"name": "n", "cpu": "1", "memory": "1Gi", "count": count}]}
    with pytest.raises(ForesizeError) as info:
        parse_scenario({**data, "workloads": []}, "s.yaml")
    assert len(str(info.value).splitlines()) == 1 and "count" in str(info.value)


# --- hostile YAML/JSON text, through every file reader ------------------------------------

# Scalars as written in a file (R-1: integers over Python's 4,300-digit conversion limit
# escaped the loader as ValueError; so did values a constructor cannot build).
HOSTILE_SCALAR = st.one_of(
    st.integers(1, 20_000).map(lambda n: "9" * n),
    st.integers(1, 5_000).map(lambda n: "-0x" + "f" * n),
    st.integers(1, 3_000).map(lambda n: "1_" + "0" * n),
    st.integers(1, 3_000).map(lambda n: "1" + ":59" * n),
    st.integers(1, 5_000).map(lambda n: "1" * n + ".5e+3"),
    st.integers(300, 10**6).map(lambda n: f"1.0e+{n}"),
    st.integers(300, 10**6).map(lambda n: f"-1.5e-{n}"),
    st.sampled_from(
        [
            ".inf",
            "-.inf",
            ".nan",
            "2023-02-30",
            "2023-13-01 10:00:00",
            "!!int abc",
            "!!float x",
            "!!binary x",
            "!!timestamp 1",
            "!!set {a}",
            "!!omap [a]",
            "!!python/object/apply:os.system ['true']",
            "0b2",
            "0o17",
            "~",
            "*alias",
            "&a [1]",
            "'" + "x" * 70_000 + "'",
        ]
    ),
    st.integers(1, 3_000).map(lambda n: "[" * n + "1" + "]" * n),
    st.integers(1, 3_000).map(lambda n: "{a: " * n + "1" + "}" * n),
)
# Where a scalar lands in an AIScaleTarget: a field of each type, and an unknown field.
HOSTILE_FIELD = st.sampled_from(
    [
        "spec.horizontal.minReplicas",
        "spec.horizontal.maxReplicas",
        "spec.vertical.containers[0].cpu.lowerbound",
        "spec.vertical.containers[0].limit.ratio",
        "spec.model.forecast_blocks",
        "spec.scaleTargetRef.name",
        "metadata.name",
        "metadata.generation",
        "spec.unknown",
    ]
)


def _hostile_target_yaml(field: str, scalar: str) -> str:
    obj = target_manifest("web", ref="web", vmode="recommendation", hmode="recommendation")
    obj.pop("status", None)
    node = obj
    *parents, leaf = field.replace("[0]", ".0").split(".")
    for key in parents:
        node = node[int(key)] if key.isdigit() else node.setdefault(key, {})
    node[leaf] = "HOSTILE"
    import yaml

    return yaml.safe_dump(obj, width=10**9).replace("HOSTILE", scalar)


def _one_line_from(path: Any, message: str) -> None:
    assert len(message.splitlines()) == 1 and message.startswith(str(path)), message
    assert len(message) < 400  # never the hostile value echoed back


@settings(_SETTINGS, max_examples=60)
@given(HOSTILE_FIELD, HOSTILE_SCALAR)
def test_hostile_yaml_is_read_or_refused_in_one_line_by_every_reader(
    tmp_path_factory, field, scalar
):
    from foresize.front.cli.validate import validate_files
    from foresize.shells.sim.scenario import load_scenario
    from foresize.shells.webhook.state_file import load_state_file

    folder = tmp_path_factory.mktemp("y")
    target = folder / "target.yaml"
    target.write_text(_hostile_target_yaml(field, scalar))
    _, _, problems = validate_files([str(target)])
    for problem in problems:
        _one_line_from(target, problem)
    try:
        load_state_file(target)
    except ForesizeError as exc:
        _one_line_from(target, str(exc))
    scenario = folder / "scenario.yaml"
    scenario.write_text(
        "nodes: [{name: n, cpu: '2', memory: 4Gi}]\n"
        f"workloads:\n  - {{kind: Deployment, name: a, replicas: {scalar}}}\n"
    )
    try:
        load_scenario(str(scenario))
    except ForesizeError as exc:
        _one_line_from(scenario, str(exc))


@settings(_SETTINGS, max_examples=60)
@given(HOSTILE_SCALAR)
def test_hostile_json_state_is_read_or_refused_in_one_line(tmp_path_factory, scalar):
    from foresize.shells.webhook.state_file import load_state_file

    path = tmp_path_factory.mktemp("j") / "state.json"
    obj = target_manifest("web", ref="web")
    path.write_text(json.dumps(obj).replace('"web"', scalar, 1))
    try:
        load_state_file(path)
    except ForesizeError as exc:
        _one_line_from(path, str(exc))
