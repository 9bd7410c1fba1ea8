"""`foresize bench shard`: the checker on crafted logs (it finds two owners, a double act, a
gap, an act outside ownership, and the handover), the request log read into Lease writes
and acts, and a small real run of three replicas, one SIGTERMed and one killed."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from foresize.bench.shard_check import Act, LeaseWrite, check, handover_seconds, read_log
from foresize.core.errors import ForesizeError
from foresize.front.cli import app
from foresize.testing.apiserver.server import RecordedRequest

DURATION, DEADLINE = 15.0, 10.0
TARGETS = [f"ns-0/wl-{i}" for i in range(12)]
SHARDS = 1  # every target in shard 0: the crafted logs are about one Lease


def renewals(replica: str, start: float, stop: float, every: float = 2.0) -> list[LeaseWrite]:
    out, t = [], start
    while t <= stop:
        out.append(LeaseWrite(t, 0, replica, replica, DURATION))
        t += every
    return out


def acts(replica: str, times: list[float], target: str = "ns-0/wl-1") -> list[Act]:
    return [Act(t, target, replica, "pods/resize") for t in times]


def run(writes: list[LeaseWrite], done: list[Act], deaths=None, end: float = 100.0) -> dict:
    return check(
        writes,
        done,
        TARGETS,
        SHARDS,
        lease_duration=DURATION,
        renew_deadline=DEADLINE,
        deaths=deaths or {},
        start=0.0,
        end=end,
    )


# A held shard 0 until its SIGTERM at 40 s (released at 40.5 s); b took over at 41 s.
CLEAN = [
    *renewals("a", 0.0, 40.0),
    LeaseWrite(40.5, 0, "a", None, 1.0),
    *renewals("b", 41.0, 100.0),
]


def test_a_clean_handover_has_one_owner_no_gap_and_no_double_act() -> None:
    doc = run(CLEAN, acts("a", [5, 15, 35]) + acts("b", [45, 60]), deaths={"a": 40.5})
    assert doc["max_owners_per_target"] == 1
    assert doc["longest_unowned_seconds"] == 0.5
    assert doc["targets_unowned_longer_than_lease"] == 0
    assert doc["acts_outside_ownership"] == 0
    assert doc["targets_acted_on_by_two"] == 0
    assert doc["acts_by_replica"] == {"a": 3, "b": 2}
    assert handover_seconds(CLEAN, "a", 40.0) == 1.0


def test_a_replica_acting_on_a_target_another_holds_is_found() -> None:
    # b never held the Lease, yet resized a pod of wl-1 between two of a's resizes.
    doc = run(CLEAN, acts("a", [5, 15, 35]) + acts("b", [20]) + acts("b", [45]))
    assert doc["acts_outside_ownership"] == 1
    assert doc["targets_acted_on_by_two"] == 1
    assert doc["targets_acted_on_by_two_examples"] == ["ns-0/wl-1"]


def test_an_act_in_flight_past_the_handover_is_outside_ownership() -> None:
    # a's last resize arrives after b acquired the shard (sent before a stopped).
    doc = run(CLEAN, acts("a", [5, 41.5]) + acts("b", [45]), deaths={"a": 40.5})
    assert doc["acts_outside_ownership"] == 1
    assert doc["targets_acted_on_by_two"] == 0  # the spans do not intersect


def test_a_write_after_the_sender_s_own_record_ran_out_is_a_late_write() -> None:
    # a's last renewal at 40 s ran out at 55 s; its stalled loop sent a resize that arrived
    # at 55.3 s, before b took over at 60 s: nobody else held the shard, yet it is late.
    writes = [*renewals("a", 0.0, 40.0), *renewals("b", 60.0, 100.0)]
    doc = run(writes, acts("a", [30, 55.3]) + acts("b", [70]))
    assert doc["acts_outside_ownership"] == 1
    assert doc["late_writes"] == 1
    assert doc["late_writes_max_seconds"] == 0.3
    # An act by a replica that never held the Lease is outside ownership, not late.
    other = run(CLEAN, acts("b", [20]))
    assert (other["acts_outside_ownership"], other["late_writes"]) == (1, 0)
    assert other["late_writes_max_seconds"] is None


def test_a_takeover_before_the_old_holder_s_deadline_is_two_owners() -> None:
    # b took shard 0 at 45 s: a's renewal at 40 s had it claimed until 50 s.
    writes = [*renewals("a", 0.0, 40.0), *renewals("b", 45.0, 100.0)]
    assert run(writes, [], deaths={"a": 41.0})["max_owners_per_target"] == 1  # a died
    assert run(writes, [])["max_owners_per_target"] == 2


def test_a_shard_left_unowned_past_the_lease_counts_its_targets() -> None:
    # a was killed after its renewal at 40 s; nobody took over before 80 s: the Lease ran
    # out at 55 s, 25 s without a holder.
    writes = [*renewals("a", 0.0, 40.0), *renewals("b", 80.0, 100.0)]
    doc = run(writes, [], deaths={"a": 41.0})
    assert doc["longest_unowned_seconds"] == 25.0
    assert doc["targets_unowned_longer_than_lease"] == len(TARGETS)
    assert handover_seconds(writes, "a", 41.0) == 39.0
    assert handover_seconds(renewals("a", 0.0, 40.0), "a", 41.0) is None  # never taken


def test_a_replica_regaining_a_shard_later_is_a_new_tenure_not_a_double_act() -> None:
    writes = [
        *renewals("a", 0.0, 20.0),
        LeaseWrite(20.5, 0, "a", None, 1.0),
        *renewals("b", 21.0, 40.0),
        LeaseWrite(40.5, 0, "b", None, 1.0),
        *renewals("a", 41.0, 100.0),
    ]
    doc = run(writes, acts("a", [5, 15]) + acts("b", [25, 35]) + acts("a", [45, 60]))
    assert doc["targets_acted_on_by_two"] == 0 and doc["acts_outside_ownership"] == 0


def record(method: str, path: str, token: str, body=None, **attrs) -> RecordedRequest:
    return RecordedRequest(0, 1.0, method, path, {}, "", body, 200, token, **attrs)


def test_the_request_log_is_read_into_lease_writes_and_acts() -> None:
    lease = {"spec": {"holderIdentity": "replica-0", "leaseDurationSeconds": 15}}
    log = [
        record("PATCH", "/l", "t0", lease, resource="leases", name="foresize-shard-2"),
        record(
            "PATCH",
            "/p",
            "t1",
            {},
            resource="pods",
            subresource="resize",
            namespace="ns-3",
            name="wl-3-1a2b3c4d5e-00001",
        ),
        record(
            "PATCH",
            "/s",
            "t1",
            {},
            resource="aiscaletargets",
            subresource="status",
            namespace="ns-3",
            name="wl-3",
        ),
        record("POST", "/e", "t1", {}, resource="events", namespace="ns-3"),  # told, not done
        record(
            "PATCH",
            "/p",
            None,
            {},
            resource="pods",
            subresource="resize",
            namespace="ns-3",
            name="wl-3-1a2b3c4d5e-00002",
        ),  # the bench's own
    ]
    from foresize.bench.shard_check import pod_target

    writes, done = read_log(log, {"t0": "replica-0", "t1": "replica-1"}, pod_target)
    assert writes == [LeaseWrite(1.0, 2, "replica-0", "replica-0", 15.0)]
    assert [(a.target, a.sender, a.what) for a in done] == [
        ("ns-3/wl-3", "replica-1", "pods/resize"),
        ("ns-3/wl-3", "replica-1", "aiscaletargets/status"),
    ]


def test_the_command_refuses_too_few_replicas() -> None:
    result = CliRunner().invoke(
        app, ["bench", "shard", "--replicas", "2", "--pods", "10", "--targets", "2", "--nodes", "1"]
    )
    assert isinstance(result.exception, ForesizeError), result.output
    assert "--replicas must be at least 3" in str(result.exception)


def test_the_command_refuses_negative_shards_naming_what_it_takes() -> None:
    result = CliRunner().invoke(
        app, ["bench", "shard", "--shards", "-1", "--pods", "10", "--targets", "2", "--nodes", "1"]
    )
    assert isinstance(result.exception, ForesizeError), result.output
    assert "--shards must be 0 (one a replica) or more, got -1" in str(result.exception)


def test_the_churn_asks_for_half_of_one_replica_s_client_budget() -> None:
    """The last replica holds every shard after the kill: what the churn asks for (a resize
    per pod, a status write per target, every interval) must fit its 50 QPS. A tenth of
    the targets every 10 s, the old default, asked for 550 writes/s at 50k pods."""
    from foresize.bench.shard import churn_for

    for pods, targets, interval in ((50_000, 5_000, 10.0), (5_000, 500, 10.0), (600, 60, 2.0)):
        churn = churn_for(pods, targets, interval)
        asked = churn * (pods / targets + 1) / interval
        assert 0.4 * 50 <= asked <= 0.5 * 50, (pods, churn, asked)
    assert (5_000 // 10) * (10 + 1) / 10.0 > 50 * 3  # the old default: over all three
    assert churn_for(10, 1, 0.1) == 1  # at least one


@pytest.mark.slow
async def test_three_replicas_share_the_targets_and_hand_over_on_sigterm_and_kill(
    tmp_path,
) -> None:
    from foresize.bench.shard import measure

    doc = await measure(
        240, 24, 2, replicas=3, interval=1.0, dwell=4.0, lease=(3.0, 2.0, 0.5), workdir=tmp_path
    )
    logs = "\n".join(p.read_text()[-1500:] for p in tmp_path.glob("replica-*.log"))
    assert doc["problems"] == [], logs
    assert doc["max_owners_per_target"] == 1
    assert doc["targets_acted_on_by_two"] == 0, doc["targets_acted_on_by_two_examples"]
    assert doc["acts_outside_ownership"] == 0
    assert doc["targets_unowned_longer_than_lease"] == 0
    assert doc["acts"] > 0
    # Balanced: one shard each before the SIGTERM (ceil(3 / 3)), not all on the first.
    assert sorted(doc["shards_held_at_start"].values()) == ["replica-0", "replica-1", "replica-2"]
    assert doc["handover_seconds_after_sigterm"] is not None
    assert doc["handover_seconds_after_kill"] is not None
    assert doc["handover_seconds_after_kill"] < 3.0 + 10.0  # the lease and a loaded box
    # At the end the replica neither signalled nor killed holds every shard.
    gone = {doc["sigterm"]["replica"], doc["sigkill"]["replica"]}
    (survivor,) = {"replica-0", "replica-1", "replica-2"} - gone
    assert {spans[-1][2] for spans in doc["holders"].values()} == {survivor}
