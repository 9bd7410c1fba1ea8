"""Heap ceilings read from a container's spec (`core.cluster.runtime`), one test per rule,
and the recommender's heap rule (`core.recommend.heap`) through the shared entry point.

Upstream documentation each rule follows:
- JVM: "The java Command" (Oracle JDK 21 tool reference: -Xmx, -XX:MaxHeapSize,
  -XX:MaxRAMPercentage default 25, -XX:MaxRAM, "Using the JDK_JAVA_OPTIONS Launcher
  Environment Variable": read by the `java` launcher only, prepended to its arguments)
  and the Troubleshooting Guide, "The JAVA_TOOL_OPTIONS Environment Variable"
  (JNI_CreateJavaVM prepends it to the options, so the command line overrides it).
- Go: package runtime, "Environment Variables" / runtime/debug.SetMemoryLimit (GOMEMLIMIT
  is bytes with an optional suffix B, KiB, MiB, GiB or TiB; "off" disables it).
- .NET: "Runtime configuration options for garbage collection" (learn.microsoft.com
  dotnet/core/runtime-config/garbage-collector): environment values are hexadecimal with
  or without 0x; GCHeapHardLimitPercent is ignored when GCHeapHardLimit is set; unset in
  a container with a limit, the default is the greater of 20 MB and 75% of the limit.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from foresize.core.cluster.kubejson import container_from
from foresize.core.cluster.runtime import heap_ceiling
from foresize.core.recommend.heap import NON_HEAP_DEFAULT_MIN
from foresize.core.recommend.params import RecommendParams
from foresize.core.recommend.request import TargetRequest
from foresize.core.recommend.target import recommend_batch
from support.recommend import GIB, NOW, flat_history, res

MIB = 2**20


def jvm(command: list[str], env: dict[str, str | None] | None = None):  # type: ignore[no-untyped-def]
    return heap_ceiling(command, [], env or {})


# --- JVM --------------------------------------------------------------------------------


def test_the_last_xmx_on_the_command_line_wins() -> None:
    h = jvm(["java", "-Xmx512m", "-Xmx2g", "-jar", "app.jar"])
    assert (h.runtime, h.fixed) == ("jvm", 2 * GIB)


def test_max_heap_size_and_xmx_are_one_flag_last_wins() -> None:
    assert jvm(["java", "-Xmx1g", "-XX:MaxHeapSize=768m", "Main"]).fixed == 768 * MIB
    assert jvm(["java", "-XX:MaxHeapSize=768m", "-Xmx1g", "Main"]).fixed == GIB


def test_the_command_line_overrides_java_tool_options() -> None:
    """JNI_CreateJavaVM prepends JAVA_TOOL_OPTIONS: later command-line flags win."""
    h = jvm(["java", "-Xmx300m", "Main"], {"JAVA_TOOL_OPTIONS": "-Xmx4g"})
    assert h.fixed == 300 * MIB


def test_jdk_java_options_comes_after_java_tool_options_and_before_the_command_line() -> None:
    env = {"JAVA_TOOL_OPTIONS": "-Xmx4g", "JDK_JAVA_OPTIONS": "-Xmx1g"}
    assert jvm(["java", "Main"], env).fixed == GIB
    assert jvm(["java", "-Xmx2g", "Main"], env).fixed == 2 * GIB


def test_jdk_java_options_is_read_by_the_java_launcher_only() -> None:
    """An embedded VM (no `java` launcher in the command) reads JAVA_TOOL_OPTIONS, not
    JDK_JAVA_OPTIONS."""
    env = {"JAVA_TOOL_OPTIONS": "-Xmx1g", "JDK_JAVA_OPTIONS": "-Xmx3g"}
    assert heap_ceiling(["/opt/app/bin/server"], [], env).fixed == GIB


def test_flags_after_the_main_class_are_the_applications() -> None:
    assert jvm(["java", "-Xmx1g", "-jar", "app.jar", "-Xmx9g"]).fixed == GIB


def test_java_opts_counts_where_the_shell_expands_it() -> None:
    h = heap_ceiling(
        ["sh", "-c", "exec java $JAVA_OPTS -jar /app.jar"], [], {"JAVA_OPTS": "-Xmx640m"}
    )
    assert h.fixed == 640 * MIB and h.assumed == ()


def test_kubernetes_expands_dollar_paren_variables_in_args() -> None:
    h = heap_ceiling(["java"], ["-Xmx$(HEAP)", "Main"], {"HEAP": "700m"})
    assert h.fixed == 700 * MIB


def test_no_heap_flag_is_25_percent_of_the_limit_seen_at_start_and_says_so() -> None:
    h = jvm(["java", "-jar", "app.jar"])
    assert h.fraction == pytest.approx(0.25)
    assert h.bytes_at(4 * GIB) == GIB
    assert any("25%" in a for a in h.assumed)


def test_max_ram_percentage_of_the_limit_and_of_max_ram() -> None:
    h = jvm(["java", "-XX:MaxRAMPercentage=75.0", "Main"])
    assert h.bytes_at(2 * GIB) == int(1.5 * GIB)
    h = jvm(["java", "-XX:MaxRAM=2g", "-XX:MaxRAMPercentage=50", "Main"])
    assert h.fixed == GIB


def test_xmx_wins_over_max_ram_percentage() -> None:
    assert jvm(["java", "-XX:MaxRAMPercentage=75", "-Xmx1g", "Main"]).fixed == GIB


@pytest.mark.parametrize(
    "flag", ["-Xmx", "-Xmx1.5g", "-Xmx12q", "-XX:MaxRAMPercentage=abc", "-XX:MaxRAMPercentage=150"]
)
def test_a_malformed_jvm_flag_is_unknown_with_the_reason(flag: str) -> None:
    h = jvm(["java", flag, "Main"])
    assert h.runtime == "jvm" and h.unknown is not None and flag.split("=")[0] in h.unknown
    assert h.bytes_at(4 * GIB) is None


def test_value_from_is_unknown_not_a_guess() -> None:
    h = jvm(["java", "Main"], {"JAVA_TOOL_OPTIONS": None})
    assert h.unknown is not None and "valueFrom" in h.unknown


def test_a_shell_script_that_does_not_parse_is_unknown() -> None:
    h = heap_ceiling(["sh", "-c", "java -Xmx1g 'unterminated"], [], {})
    assert h.runtime is None or h.unknown is not None


def test_no_runtime_no_ceiling() -> None:
    assert heap_ceiling(["/bin/server", "--port=80"], [], {"PORT": "80"}).runtime is None


# --- Go ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [("1073741824", GIB), ("512MiB", 512 * MIB), ("2GiB", 2 * GIB), ("100B", 100)],
)
def test_gomemlimit_suffixes(value: str, expected: int) -> None:
    assert heap_ceiling(["/app"], [], {"GOMEMLIMIT": value}).fixed == expected


@pytest.mark.parametrize("value", ["512M", "1GB", "1.5GiB", "-1", "lots"])
def test_a_malformed_gomemlimit_is_unknown(value: str) -> None:
    h = heap_ceiling(["/app"], [], {"GOMEMLIMIT": value})
    assert h.runtime == "go" and h.unknown is not None and h.fixed is None


def test_gomemlimit_off_is_no_ceiling() -> None:
    h = heap_ceiling(["/app"], [], {"GOMEMLIMIT": "off"})
    assert h.unknown is not None and h.bytes_at(GIB) is None


# --- .NET -------------------------------------------------------------------------------


def test_dotnet_hard_limit_is_hexadecimal_with_or_without_0x() -> None:
    assert heap_ceiling([], [], {"DOTNET_GCHeapHardLimit": "0xC800000"}).fixed == 200 * MIB
    assert heap_ceiling([], [], {"DOTNET_GCHeapHardLimit": "C800000"}).fixed == 200 * MIB


def test_dotnet_percent_is_hex_and_ignored_when_the_hard_limit_is_set() -> None:
    h = heap_ceiling([], [], {"DOTNET_GCHeapHardLimitPercent": "0x32"})
    assert h.bytes_at(GIB) == GIB // 2
    h = heap_ceiling(
        [], [], {"DOTNET_GCHeapHardLimitPercent": "0x32", "DOTNET_GCHeapHardLimit": "0x10000000"}
    )
    assert h.fixed == 256 * MIB and any("ignored" in a for a in h.assumed)


def test_dotnet_default_is_75_percent_at_least_20_mb() -> None:
    h = heap_ceiling(["dotnet", "app.dll"], [], {})
    assert h.bytes_at(GIB) == int(0.75 * GIB)
    assert h.bytes_at(16 * MIB) == 20 * 1000 * 1000


def test_a_malformed_dotnet_value_is_unknown() -> None:
    h = heap_ceiling([], [], {"DOTNET_GCHeapHardLimit": "200MB"})
    assert h.runtime == "dotnet" and h.unknown is not None and "hex" in h.unknown


def test_the_pod_json_carries_command_args_and_env() -> None:
    c = container_from(
        {
            "name": "app",
            "command": ["java"],
            "args": ["-Xmx1g", "Main"],
            "env": [{"name": "A", "value": "1"}, {"name": "B", "valueFrom": {"x": 1}}],
        }
    )
    assert heap_ceiling(c.command, c.args, c.env).fixed == GIB
    assert c.env == {"A": "1", "B": None}


# --- The recommender's heap rule --------------------------------------------------------


def _memory(history_bytes: float, command: list[str], limit: int = 4 * GIB) -> tuple[int, str]:
    cur = {"app": res(500, 2 * GIB, lmem=limit)}
    req = TargetRequest(
        RecommendParams(),
        {"app": flat_history(0.3, history_bytes)},
        cur,
        runtimes={"app": heap_ceiling(command, [], {})},
    )
    (out,) = recommend_batch([req], NOW)
    return out.suggestion.containers["app"].requests["memory"], out.runtime_notes.get("app", "")


def test_memory_is_never_below_the_heap_ceiling_plus_non_heap() -> None:
    """Usage of 600Mi under a 1Gi -Xmx: the heap has not filled yet. Without the rule the
    request follows usage (~660Mi) and the JVM is killed when its heap fills."""
    request, note = _memory(600 * MIB, ["java", "-Xmx1g", "Main"])
    assert request >= GIB + max(GIB // 4, NON_HEAP_DEFAULT_MIN)
    assert "-Xmx1g" in note
    plain, _ = _memory(600 * MIB, ["/bin/server"])
    assert plain < GIB


def test_non_heap_is_learned_from_usage_above_the_heap() -> None:
    request, note = _memory(1.5 * GIB, ["java", "-Xmx1g", "Main"])
    assert "learned" in note
    assert request >= int(1.5 * GIB)


def test_a_percentage_heap_is_of_the_limit_in_force() -> None:
    """MaxRAMPercentage=50 of a 4Gi limit in force: a 2Gi heap, whatever usage shows."""
    request, _ = _memory(500 * MIB, ["java", "-XX:MaxRAMPercentage=50", "Main"])
    assert request >= 2 * GIB


def test_an_unknown_ceiling_sets_no_floor_and_says_why() -> None:
    request, note = _memory(600 * MIB, ["java", "-Xmx12q", "Main"])
    assert request < GIB and "unknown" in note


def test_the_images_entrypoint_reads_jdk_java_options_only_as_an_assumption() -> None:
    h = heap_ceiling([], [], {"JDK_JAVA_OPTIONS": "-Xmx3g", "JAVA_TOOL_OPTIONS": "-Xmx1g"})
    assert h.fixed == 3 * GIB and any("java launcher" in a for a in h.assumed)


def test_the_shared_pass_reads_the_heap_from_the_pods_spec() -> None:
    """Through `plan_suggestions` (the pass both shells run): a pod running `java -Xmx1g`
    at 200Mi gets no memory request below 1Gi + non-heap; the same pod without the flag's
    command is sized on its usage."""
    from dataclasses import replace

    from foresize.core.api.quantity import to_bytes
    from foresize.core.recommend.suggestions import plan_suggestions
    from support.selectors import NOW as T
    from support.selectors import _history, _snapshot, _target

    history = _history({"light": 0.05, "heavy": 0.05})

    def memory(command: tuple[str, ...]) -> int:
        snap = _snapshot(_target({"tier": "batch"}))
        for pod in snap.pods:
            pod.containers = [replace(c, command=command) for c in pod.containers]
        (write,) = plan_suggestions(snap, history, T)
        (entry,) = write.status["vertical_suggestion"]["containers"]
        return to_bytes(entry["requests"]["memory"])

    assert memory(("java", "-Xmx1g", "-jar", "app.jar")) >= GIB + GIB // 4
    assert memory(("/bin/server",)) < 512 * MIB


def test_the_targets_status_says_what_the_heap_rule_read_assumed_or_could_not() -> None:
    """The heap rule's note per container goes into `status.runtime_notes`: the flag it
    read, the default it assumed, or why the ceiling is unknown (never a guess as fact)."""
    from dataclasses import replace

    from foresize.core.recommend.suggestions import plan_suggestions
    from support.selectors import NOW as T
    from support.selectors import _history, _snapshot, _target

    history = _history({"light": 0.05, "heavy": 0.05})

    def notes(command: tuple[str, ...]) -> list[dict[str, str]]:
        snap = _snapshot(_target({"tier": "batch"}))
        for pod in snap.pods:
            pod.containers = [replace(c, command=command) for c in pod.containers]
        (write,) = plan_suggestions(snap, history, T)
        return write.status["runtime_notes"]

    (read,) = notes(("java", "-Xmx1g", "-jar", "app.jar"))
    assert "-Xmx1g" in read["note"] and "non-heap" in read["note"]
    # The allowance itself, for the pod webhook's heap rewrite (`admission.heap`): usage
    # here is far under the heap, so it is the default, a quarter of the 1Gi heap.
    assert read["non_heap"] == "256Mi" and "256Mi" in read["note"]
    (bad,) = notes(("java", "-Xmx1.5g", "-jar", "app.jar"))
    assert "unknown" in bad["note"] and "-Xmx1.5g" in bad["note"]
    assert "non_heap" not in bad
    (both,) = notes(("java", "-Xms4g", "-Xmx1g", "-jar", "app.jar"))  # contradictory
    assert "unknown" in both["note"] and "-Xms4g" in both["note"]
    (twice,) = notes(("java", "-Xmx2g", "-Xmx1g", "-jar", "app.jar"))
    assert "-Xmx1g" in twice["note"] and "overridden" in twice["note"]
    assert notes(("/bin/server",)) == []


def test_contradictory_jvm_flags_say_what_was_assumed_or_make_the_ceiling_unknown() -> None:
    """Flags that contradict each other: the JVM's rule (the last -Xmx wins, -Xmx over
    -XX:MaxRAMPercentage) is applied and the overruled flag is named in `assumed`; an
    initial heap above the maximum stops HotSpot from starting: unknown, with both named."""
    h = jvm(["java", "-Xmx2g", "-XX:MaxRAMPercentage=75", "-Xmx1g", "Main"])
    assert h.fixed == GIB
    assert any("-Xmx2g in the command line overridden by -Xmx1g" in a for a in h.assumed)
    assert any("-XX:MaxRAMPercentage=75 in the command line ignored" in a for a in h.assumed)
    tool = jvm(["java", "-Xmx1g", "Main"], {"JAVA_TOOL_OPTIONS": "-Xmx2g"})
    assert tool.fixed == GIB and any("JAVA_TOOL_OPTIONS" in a for a in tool.assumed)
    bad = jvm(["java", "-Xms4g", "-Xmx1g", "Main"])
    assert bad.unknown is not None and "-Xms4g" in bad.unknown and "-Xmx1g" in bad.unknown
    assert bad.bytes_at(8 * GIB) is None


_WORDS = st.sampled_from(
    [
        "java", "-jar", "app.jar", "Main", "-Xmx1g", "-Xmx512m", "-Xmx", "-Xms2g",
        "-XX:MaxRAMPercentage=75", "-XX:MaxRAMPercentage=1e400", "-XX:MaxRAM=4g",
        "-XX:-UseContainerSupport", "-XX:MaxHeapSize=0", "sh", "-c", "$JAVA_OPTS", "'",
        '"', "$(X)", "$$", "dotnet", "exec", "--", "-Xmx99999999999t",
    ]
)  # fmt: skip
_ENV_NAMES = st.sampled_from(
    ["JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS", "JAVA_OPTS", "_JAVA_OPTIONS", "GOMEMLIMIT",
     "DOTNET_GCHeapHardLimit", "DOTNET_GCHeapHardLimitPercent", "X"]
)  # fmt: skip


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    command=st.lists(st.one_of(_WORDS, st.text(max_size=12)), max_size=8),
    args=st.lists(st.one_of(_WORDS, st.text(max_size=12)), max_size=6),
    env=st.dictionaries(
        _ENV_NAMES,
        st.one_of(st.none(), _WORDS, st.text(max_size=16), st.just("-Xmx1g -Xms8g")),
        max_size=4,
    ),
    env_from=st.booleans(),
    limit=st.one_of(st.none(), st.integers(0, 2**45)),
)
def test_fuzz_the_heap_flag_parser_never_raises_nor_guesses(
    command: list[str], args: list[str], env: dict, env_from: bool, limit: int | None
) -> None:
    """Whatever a pod spec says (it crosses a trust boundary): no exception, exactly one
    of fixed / fraction / unknown for a runtime, a ceiling in range, and envFrom said."""
    h = heap_ceiling(command, args, env, env_from)
    if h.runtime is None:
        assert h.bytes_at(limit) is None
        return
    assert sum(x is not None for x in (h.fixed, h.fraction, h.unknown)) == 1
    if h.unknown is not None:
        assert h.unknown and h.bytes_at(limit) is None
    if h.fixed is not None:
        assert 0 <= h.fixed <= 2**63 - 1
    if h.fraction is not None:
        assert 0 < h.fraction <= 1
    if env_from:
        assert any("envFrom" in a for a in h.assumed)
    got = h.bytes_at(limit)
    assert got is None or got >= 0


def test_non_heap_is_learned_against_the_heap_the_pods_run_not_the_templates() -> None:
    """With `keep_heap_consistent` the webhook rewrote the pods' `-Xmx1g` to `-Xmx1376m`;
    they use their whole heap and 250Mi more (1626Mi). Read against the template's 1Gi the
    non-heap would be 602Mi, and the next rewrite (limit less non-heap) would give the
    heap nothing more (found by `bench runtimes`' heap_too_small run: the heap stayed
    capped all three days). Read against the pods' own heap it is the 250Mi it is."""
    from dataclasses import replace

    from foresize.adapters.history.memory import UsageHistory
    from foresize.adapters.history.metrics_server import HistorySink, Sample
    from foresize.core.api.quantity import to_bytes
    from foresize.core.api.types import parse_target
    from foresize.core.cluster.model import (
        Container,
        OwnerRef,
        PodTemplate,
        ResourceRequirements,
        Workload,
    )
    from foresize.core.cluster.snapshot import ClusterSnapshot
    from foresize.core.recommend.sources import running_heap_ceilings
    from foresize.core.recommend.suggestions import plan_suggestions
    from support.selectors import NOW as T
    from support.selectors import _pod

    template = Container("work", ResourceRequirements({"cpu": 100, "memory": 2 * GIB}, {}))
    template = replace(template, command=("java", "-Xmx1g", "-jar", "app.jar"))
    pods = []
    for i, xmx in enumerate(("-Xmx1376m", "-Xmx1376m")):
        pod = _pod(f"orders-{i}", OwnerRef("StatefulSet", "orders"), {"app": "orders"})
        pod.containers = [replace(template, command=("java", xmx, "-jar", "app.jar"))]
        pods.append(pod)
    sts = Workload(
        "StatefulSet",
        "batch",
        "orders",
        selector={"app": "orders"},
        template=PodTemplate(containers=[template]),
    )
    target = parse_target(
        {
            "apiVersion": "foresize.io/v1",
            "kind": "AIScaleTarget",
            "metadata": {"name": "orders", "namespace": "batch", "uid": "t-orders"},
            "spec": {
                "scaleTargetRef": {"kind": "StatefulSet", "name": "orders"},
                "vertical": {"mode": "recommendation"},
            },
        }
    )
    snap = ClusterSnapshot(now=T, pods=pods, workloads={sts.key: sts}, targets=[target])
    ceilings = running_heap_ceilings(snap, target, [template])
    assert ceilings["work"].fixed == 1376 * MIB
    history = UsageHistory(step=60.0)
    HistorySink(history).add_samples(
        [
            Sample(T - i * 300.0, "batch", "orders", f"orders-{i % 2}", "work", 0.2, 1626 * MIB)
            for i in range(2 * 288)
        ]
    )
    (write,) = plan_suggestions(snap, history, T)
    (note,) = write.status["runtime_notes"]
    assert to_bytes(note["non_heap"]) == 250 * MIB, note
    assert "learned" in note["note"]
    # No running pod (all gone, or not created yet): the template's setting.
    empty = ClusterSnapshot(now=T, pods=[], workloads={sts.key: sts}, targets=[target])
    assert running_heap_ceilings(empty, target, [template])["work"].fixed == GIB
