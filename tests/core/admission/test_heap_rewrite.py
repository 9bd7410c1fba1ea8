"""The pod webhook keeps a managed runtime's heap setting consistent with the memory limit
it writes (`spec.vertical.runtime.keep_heap_consistent`, `core.admission.heap`, issue 25).

Upstream documentation each rule follows (the same as the detection's,
tests/core/cluster/test_runtime_heap.py):
- JVM: "The java Command" (Oracle JDK 21 tool reference: -Xmx / -XX:MaxHeapSize take
  k, m, g suffixes; -XX:MaxRAMPercentage; "Using the JDK_JAVA_OPTIONS Launcher Environment
  Variable": the launcher prepends it to its command-line arguments) and the Java SE
  Troubleshooting Guide, "The JAVA_TOOL_OPTIONS Environment Variable" (JNI_CreateJavaVM
  prepends it to the options, so later options override it): the option read last wins,
  so only the winning -Xmx is rewritten, in the place it is read from.
- Go: package runtime, "Environment Variables", and runtime/debug.SetMemoryLimit:
  GOMEMLIMIT is bytes with an optional unit suffix B, KiB, MiB, GiB or TiB.
- .NET: "Runtime configuration options for garbage collection": DOTNET_GCHeapHardLimit
  is a hexadecimal byte count (with or without 0x).
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from foresize.core.admission.heap import (
    HEAP_REWRITE_ANNOTATION,
    MIB,
    non_heap_allowances,
    plan_heap,
)
from foresize.core.admission.review import review_pod
from foresize.core.cluster.kubejson import container_from
from foresize.core.cluster.runtime import heap_ceiling
from support.admission import apply_patch, decode_patch, idx, pod_json, review, target_manifest

GIB = 1024 * MIB
# The suggestion raises memory from the template's 1Gi to 1536Mi (request = limit).
RAISED = {"app": {"requests": {"memory": "1536Mi"}, "limits": {"memory": "1536Mi"}}}


def keeping(
    keep: bool = True, non_heap: str | None = "300Mi", suggestion: Any = None
) -> dict[str, Any]:
    t = target_manifest(suggestion=suggestion if suggestion is not None else RAISED)
    if keep:
        t["spec"]["vertical"]["runtime"] = {"keep_heap_consistent": True}
    if non_heap is not None:
        t["status"]["runtime_notes"] = [
            {"container": "app", "note": "jvm heap ...", "non_heap": non_heap}
        ]
    return t


def app(**fields: Any) -> dict[str, Any]:
    return {
        "name": "app",
        "image": "eclipse-temurin:21",
        "resources": {"requests": {"memory": "1Gi"}, "limits": {"memory": "1Gi"}},
        **fields,
    }


def admit(target: dict[str, Any], container: dict[str, Any]) -> tuple[dict, dict, list[str]]:
    """The admitted container, its pod's annotations and the response's warnings."""
    pod = pod_json(containers=[container])
    response = review_pod(review(pod), idx(target), 1000.0)
    assert response["response"]["allowed"] is True
    ops = decode_patch(response) or []
    out = apply_patch(pod, ops) if ops else pod
    return (
        out["spec"]["containers"][0],
        out["metadata"].get("annotations") or {},
        response["response"].get("warnings") or [],
    )


def test_off_by_default_the_heap_flag_is_left_as_written() -> None:
    c, ann, _ = admit(keeping(keep=False), app(command=["java", "-Xmx700m", "-jar", "a.jar"]))
    assert c["resources"]["limits"]["memory"] == "1536Mi"
    assert c["command"] == ["java", "-Xmx700m", "-jar", "a.jar"]
    assert HEAP_REWRITE_ANNOTATION not in ann


def test_a_command_line_xmx_becomes_the_new_limit_minus_the_learned_non_heap() -> None:
    c, ann, _ = admit(keeping(), app(command=["java", "-Xmx700m", "-jar", "a.jar"]))
    assert c["resources"]["limits"]["memory"] == "1536Mi"
    assert c["command"] == ["java", "-Xmx1236m", "-jar", "a.jar"]  # 1536 - 300
    record = json.loads(ann[HEAP_REWRITE_ANNOTATION])["app"][0]
    assert record["field"] == "command[1]"
    assert (record["from"], record["to"]) == ("-Xmx700m", "-Xmx1236m")
    assert "300Mi (learned)" in record["why"]


def test_the_last_xmx_is_the_one_rewritten_and_application_arguments_are_not() -> None:
    """The java launcher's VM options end at -jar: an -Xmx after it is the program's."""
    c, _, _ = admit(
        keeping(),
        app(command=["java"], args=["-Xmx400m", "-XX:MaxHeapSize=700m", "-jar", "a.jar", "-Xmx9g"]),
    )
    assert c["args"] == ["-Xmx400m", "-XX:MaxHeapSize=1236m", "-jar", "a.jar", "-Xmx9g"]


def test_java_tool_options_is_rewritten_only_when_the_command_line_does_not_override_it() -> None:
    env = [{"name": "JAVA_TOOL_OPTIONS", "value": "-Dx=1  -Xmx700m -Dy=2"}]
    c, _, _ = admit(keeping(), app(command=["java", "-jar", "a.jar"], env=env))
    assert c["env"][0]["value"] == "-Dx=1  -Xmx1236m -Dy=2"  # the other words kept
    c, _, _ = admit(keeping(), app(command=["java", "-Xmx700m", "-jar", "a.jar"], env=env))
    assert c["env"][0]["value"] == "-Dx=1  -Xmx700m -Dy=2"  # the command line wins
    assert c["command"][1] == "-Xmx1236m"


def test_jdk_java_options_wins_over_java_tool_options_and_loses_to_the_command_line() -> None:
    env = [
        {"name": "JAVA_TOOL_OPTIONS", "value": "-Xmx600m"},
        {"name": "JDK_JAVA_OPTIONS", "value": "-Xmx700m"},
    ]
    c, _, _ = admit(keeping(), app(command=["java", "-jar", "a.jar"], env=env))
    assert [e["value"] for e in c["env"]] == ["-Xmx600m", "-Xmx1236m"]


def test_a_percentage_heap_is_left_it_follows_the_limit_written_at_creation() -> None:
    c, ann, warnings = admit(
        keeping(), app(command=["java", "-XX:MaxRAMPercentage=75", "-jar", "a.jar"])
    )
    assert c["resources"]["limits"]["memory"] == "1536Mi"
    assert c["command"][1] == "-XX:MaxRAMPercentage=75"
    assert HEAP_REWRITE_ANNOTATION not in ann and not warnings


@pytest.mark.parametrize(
    ("written", "expected"),
    [
        ("700MiB", "1236MiB"),
        ("734003200", "1236MiB"),
        ("1GiB", "1236MiB"),
        ("716800KiB", "1236MiB"),
    ],
)
def test_gomemlimit_with_each_suffix_is_rewritten_in_mib(written: str, expected: str) -> None:
    env = [{"name": "GOMEMLIMIT", "value": written}]
    c, _, _ = admit(keeping(), app(command=["/server"], env=env))
    assert c["env"][0]["value"] == expected
    assert heap_ceiling(["/server"], [], {"GOMEMLIMIT": expected}).fixed == 1236 * MIB


def test_dotnet_hard_limit_is_rewritten_in_hexadecimal_keeping_its_prefix() -> None:
    for written, expected in (("0x2BC00000", f"0x{1236 * MIB:x}"), ("2BC00000", f"{1236 * MIB:x}")):
        env = [{"name": "DOTNET_GCHeapHardLimit", "value": written}]
        c, _, _ = admit(keeping(), app(command=["dotnet", "app.dll"], env=env))
        assert c["env"][0]["value"] == expected


def test_value_from_and_shell_scripts_are_never_rewritten_and_the_warning_says_why() -> None:
    hidden = [{"name": "GOMEMLIMIT", "valueFrom": {"configMapKeyRef": {"name": "x", "key": "y"}}}]
    c, ann, warnings = admit(keeping(), app(command=["/server"], env=hidden))
    assert c["resources"]["limits"]["memory"] == "1536Mi"  # the limit is still written
    assert c["env"] == hidden and HEAP_REWRITE_ANNOTATION not in ann
    assert any("GOMEMLIMIT" in w and "not rewritten" in w for w in warnings)
    script = ["sh", "-c", "exec java -Xmx700m -jar a.jar"]
    c, ann, warnings = admit(keeping(), app(command=script))
    assert c["command"] == script and HEAP_REWRITE_ANNOTATION not in ann
    assert any("no separate literal token" in w for w in warnings)


def test_an_expanded_token_is_not_literal_and_is_left() -> None:
    env = [{"name": "HEAP", "value": "-Xmx700m"}]
    c, _, warnings = admit(keeping(), app(command=["java", "$(HEAP)", "-jar", "a.jar"], env=env))
    assert c["command"][1] == "$(HEAP)" and c["env"] == env
    assert any("literal" in w for w in warnings)


def test_without_a_learned_allowance_the_default_one_is_used_and_named() -> None:
    """The heap rule's default: a quarter of the heap, at least 64Mi (`recommend.heap`)."""
    c, ann, _ = admit(keeping(non_heap=None), app(command=["java", "-Xmx700m", "Main"]))
    assert c["command"][1] == "-Xmx1361m"  # 1536 - 175 (700 / 4)
    assert "default allowance" in json.loads(ann[HEAP_REWRITE_ANNOTATION])["app"][0]["why"]


def test_the_rewritten_heap_stays_within_half_and_twice_the_written_one() -> None:
    c, _, _ = admit(keeping(non_heap="64Mi"), app(command=["java", "-Xmx300m", "Main"]))
    assert c["command"][1] == "-Xmx600m"  # 1536 - 64 capped at twice 300
    small = {"app": {"requests": {"memory": "512Mi"}, "limits": {"memory": "512Mi"}}}
    c, ann, warnings = admit(keeping(suggestion=small), app(command=["java", "-Xmx800m", "Main"]))
    assert c["resources"]["limits"]["memory"] == "512Mi"
    assert c["command"][1] == "-Xmx800m" and HEAP_REWRITE_ANNOTATION not in ann
    assert any("less than half the heap" in w for w in warnings)


def test_a_heap_below_xms_is_not_written_the_jvm_would_not_start() -> None:
    small = {"app": {"requests": {"memory": "700Mi"}, "limits": {"memory": "700Mi"}}}
    c, _, warnings = admit(
        keeping(suggestion=small), app(command=["java", "-Xms600m", "-Xmx800m", "Main"])
    )
    assert c["command"][2] == "-Xmx800m"
    assert any("-Xms" in w for w in warnings)


def test_a_malformed_heap_flag_admits_the_pod_unchanged_naming_the_flag() -> None:
    for command in (["java", "-Xmx12q", "Main"], ["java", "-Xms2g", "-Xmx1g", "Main"]):
        pod = pod_json(containers=[app(command=command)])
        response = review_pod(review(pod), idx(keeping()), 1000.0)
        assert response["response"]["allowed"] is True
        assert decode_patch(response) is None
        warnings = response["response"]["warnings"]
        assert any(command[-2] in w and "admitted unchanged" in w for w in warnings), warnings
    env = [{"name": "GOMEMLIMIT", "value": "lots"}]
    pod = pod_json(containers=[app(command=["/server"], env=env)])
    response = review_pod(review(pod), idx(keeping()), 1000.0)
    assert decode_patch(response) is None
    assert any("GOMEMLIMIT" in w for w in response["response"]["warnings"])


def test_no_limit_written_no_heap_rewritten() -> None:
    """Only a limit the webhook writes moves the heap: a request-only change does not."""
    only_request = {"app": {"requests": {"memory": "900Mi"}}}
    bare = app(command=["java", "-Xmx700m", "Main"])
    bare["resources"] = {"requests": {"memory": "1Gi"}}
    c, ann, _ = admit(keeping(suggestion=only_request), bare)
    assert c["command"][1] == "-Xmx700m" and HEAP_REWRITE_ANNOTATION not in ann


def test_the_published_allowances_are_read_tolerantly() -> None:
    notes = [
        {"container": "a", "non_heap": "300Mi"},
        {"container": "b", "non_heap": "lots"},
        {"container": 3, "non_heap": "1Gi"},
        "x",
        {"container": "c", "non_heap": "9" * 5000},
    ]
    assert non_heap_allowances(notes) == {"a": 300 * MIB}
    assert non_heap_allowances(None) == {}


# --- fuzz: odd flags never raise ---------------------------------------------------------

_ODD = [
    "",
    " ",
    "9" * 5000,
    "0" * 5000 + "1",
    str(2**64),
    str(2**63 - 1),
    "-1",
    "1e9",
    "NaN",
    "inf",
    "١٢٣",  # Arabic-Indic digits: str.isdigit() says yes, the JVM says no
    "１２８m",  # full-width digits
    "128ｍ",
    "😀",
    "\x00",
    "0x",
    "0xZZ",
    "128MiBB",
    "off",
    "1TiB",
    "99999999999999999999TiB",
]


def _odd_container(rng: random.Random) -> dict[str, Any]:
    value = rng.choice(_ODD) + rng.choice(["", "m", "g", "k", "MiB", "GiB", "B"])
    env_name = rng.choice(
        ["GOMEMLIMIT", "JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS", "DOTNET_GCHeapHardLimit", "X"]
    )
    flag = rng.choice(["-Xmx", "-XX:MaxHeapSize=", "-XX:MaxRAMPercentage=", "-Xms", "-XX:MaxRAM="])
    env_value = f"{flag}{value}" if env_name.startswith("J") else value
    command = rng.choice(
        [["java", f"{flag}{value}", "-jar", "a.jar"], ["sh", "-c", f"java {flag}{value}"], []]
    )
    return app(command=command, env=[{"name": env_name, "value": env_value}])


def test_seeded_odd_heap_settings_never_raise_and_are_always_admitted() -> None:
    rng = random.Random(25)
    target = idx(keeping())
    for _ in range(150):
        container = _odd_container(rng)
        pod = pod_json(containers=[container])
        response = review_pod(review(pod), target, 1000.0)
        assert response["response"]["allowed"] is True
        assert not any("internal error" in w for w in response["response"].get("warnings", []))
        for limit in (1, 512 * MIB, 2**63 - 1):
            plan = plan_heap(container_from(container), limit, rng.choice([None, 0, 300 * MIB]))
            assert plan.warning is None or len(plan.warning) < 400


def test_a_raise_made_by_an_oom_kill_goes_to_the_non_heap_the_heap_is_left() -> None:
    """A cgroup OOM kill of a JVM with a fixed heap is its non-heap running out; the
    allowance learned before the kill is too small, and a heap that followed the raised
    limit would eat the raise."""
    t = keeping()
    t["status"]["oom_floors"] = [{"container": "app", "memory": "1536Mi"}]
    c, ann, _ = admit(t, app(command=["java", "-Xmx700m", "Main"]))
    assert c["resources"]["limits"]["memory"] == "1536Mi"
    assert c["command"][1] == "-Xmx700m" and HEAP_REWRITE_ANNOTATION not in ann


# --- the policy field through the hierarchy ----------------------------------------------


def test_the_field_is_inherited_from_a_cluster_policy_and_its_source_reported() -> None:
    """`vertical.runtime.keep_heap_consistent` set by the cluster's default policy reaches
    the target's effective spec (the one the webhook reads), and `status.policy` names
    where it came from; the target's own `false` overrides it."""
    from foresize.core.api.types import AIScaleTarget, ClusterAIScalePolicy
    from foresize.core.cluster.policies import PolicyIndex, resolve
    from foresize.core.cluster.target import target_view

    default = ClusterAIScalePolicy.model_validate(
        {
            "metadata": {"name": "default"},
            "spec": {"vertical": {"runtime": {"keep_heap_consistent": True}}},
        }
    )
    policies = PolicyIndex.build([default])
    inherited = resolve(AIScaleTarget.model_validate(keeping(keep=False)), policies)
    field = inherited.status.fields["vertical.runtime.keep_heap_consistent"]
    assert (field.value, field.source) == ("true", "cluster/policy:default")
    assert target_view(inherited.target).keep_heap_consistent
    own = keeping(keep=False)
    own["spec"]["vertical"]["runtime"] = {"keep_heap_consistent": False}
    overridden = resolve(AIScaleTarget.model_validate(own), policies)
    field = overridden.status.fields["vertical.runtime.keep_heap_consistent"]
    assert (field.value, field.source) == ("false", "target")
    assert not target_view(overridden.target).keep_heap_consistent
    assert not target_view(AIScaleTarget.model_validate(keeping(keep=False))).keep_heap_consistent


def test_the_simulated_clusters_admission_gets_the_same_rewrite() -> None:
    """`mutate_pod` (the simulator's admission hook) applies the decision to the pod
    model: the container the simulated kubelet runs has the rewritten heap."""
    from foresize.core.admission.pod import mutate_pod
    from foresize.core.cluster.kubejson import pod_from

    env = [{"name": "GOMEMLIMIT", "value": "700MiB"}]
    pod = pod_from(pod_json(containers=[app(command=["/server"], env=env)]), "shop")
    admitted, changed = mutate_pod(pod, None, idx(keeping()), 1000.0)
    assert changed
    (c,) = admitted.containers
    assert c.env["GOMEMLIMIT"] == "1236MiB" and c.resources.limits["memory"] == 1536 * MIB
    assert HEAP_REWRITE_ANNOTATION in admitted.annotations
    assert pod.containers[0].env["GOMEMLIMIT"] == "700MiB"  # the original is not touched
