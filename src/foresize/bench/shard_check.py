"""What `foresize bench shard` proves, read from the strict server's request log alone: who
held each shard's Lease and who acted on each target, at every moment.

The log is reduced to two lists. `LeaseWrite`: a successful create or patch of a shard's
Lease, with the replica that sent it (each replica has a token of its own) and the holder it
wrote (None: a release). `Act`: a write on the actions' budget that names a target (a pod's
resize or eviction, the target's status or metadata), with its sender. Events are not acts:
they are told, not done, and go out on their own budget.

From them, with the Lease timings the replicas ran with:
- a replica *claims* a shard from each successful acquire or renewal it sent until the
  renew deadline after it (a replica acts only while its last renewal is younger than
  that; counted from the server's receipt, later than the replica's own start of the
  round, so a claim here is never shorter than the replica's); a claim ends early at the
  replica's release or its death. A target's *owners* at a moment are the replicas
  claiming its shard: never more than one;
- the Lease's *holder* at a moment is the holder of its last write, until that write's
  `leaseDurationSeconds` ran out; a shard without one is unowned (a gap);
- an act is *outside ownership* when its sender was not the Lease's holder as it arrived;
  a *late write* is one of those whose sender had written the Lease last, its record run
  out before the act arrived (`late_writes_max_seconds`: by how much) — a replica acting on
  a claim it no longer had, whether or not another replica had taken the shard yet;
  two replicas *overlap* on a target when the spans from the first to the last act of each
  (within one tenure of the shard) intersect.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from foresize.shells.kube.leader import LEASE_PREFIX, shard_of

# The writes that act on a target: (resource, subresource) of the request log.
ACTING = {
    ("pods", "resize"),
    ("pods", "eviction"),
    ("pods", ""),
    ("aiscaletargets", "status"),
    ("aiscaletargets", ""),
}


@dataclass(frozen=True, slots=True)
class LeaseWrite:
    time: float
    shard: int
    sender: str  # the replica that sent it
    holder: str | None  # the holder it wrote; None: released
    duration: float  # its leaseDurationSeconds


@dataclass(frozen=True, slots=True)
class Act:
    time: float
    target: str  # "namespace/name"
    sender: str
    what: str  # resource/subresource


def pod_target(name: str) -> str:
    """The target of a synthetic pod (`wl-3-1a2b3c4d5e-00001` is wl-3's)."""
    return name.rsplit("-", 2)[0]


def read_log(
    requests: Iterable[Any], senders: dict[str, str], target_of_pod: Callable[[str], str]
) -> tuple[list[LeaseWrite], list[Act]]:
    """The request log (the strict server's `RecordedRequest`s) as Lease writes and acts;
    `senders` maps each replica's token to its name (requests without one are the bench's)."""
    writes: list[LeaseWrite] = []
    acts: list[Act] = []
    for r in requests:
        sender = senders.get(r.token or "")
        if sender is None or r.method in ("GET", "HEAD"):
            continue
        if r.resource == "leases":
            if not (200 <= r.code < 300 and r.name.startswith(LEASE_PREFIX + "-")):
                continue
            name = r.name or ((r.body or {}).get("metadata") or {}).get("name", "")
            spec = (r.body or {}).get("spec") or {}
            writes.append(
                LeaseWrite(
                    r.time,
                    int(name.rsplit("-", 1)[1]),
                    sender,
                    spec.get("holderIdentity") or None,
                    float(spec.get("leaseDurationSeconds") or 0),
                )
            )
        elif (r.resource, r.subresource) in ACTING and r.name:
            name = target_of_pod(r.name) if r.resource == "pods" else r.name
            what = f"{r.resource}/{r.subresource}" if r.subresource else r.resource
            acts.append(Act(r.time, f"{r.namespace}/{name}", sender, what))
    return writes, acts


# ------------------------------------------------------------------ timelines
Span = tuple[float, float, str]  # (start, end, replica)


def claims(
    writes: list[LeaseWrite], renew_deadline: float, deaths: dict[str, float], end: float
) -> dict[int, list[Span]]:
    """Per shard, each replica's claim spans (merged), in start order."""
    by: dict[tuple[int, str], list[tuple[float, float]]] = defaultdict(list)
    for w in sorted(writes, key=lambda w: w.time):
        key = (w.shard, w.sender)
        if w.holder == w.sender:
            cut = min(deaths.get(w.sender, end), end)
            span = (w.time, min(w.time + renew_deadline, cut))
            spans = by[key]
            if spans and span[0] <= spans[-1][1]:
                spans[-1] = (spans[-1][0], max(spans[-1][1], span[1]))
            else:
                spans.append(span)
        elif w.holder is None and by[key]:  # its release: the claim ends here
            start, stop = by[key][-1]
            by[key][-1] = (start, min(stop, w.time))
    out: dict[int, list[Span]] = defaultdict(list)
    for (shard, replica), spans in by.items():
        out[shard].extend((a, b, replica) for a, b in spans if b > a)
    return {s: sorted(v) for s, v in out.items()}


def holders(writes: list[LeaseWrite], end: float) -> dict[int, list[Span]]:
    """Per shard, who the Lease named and for how long (a release names nobody)."""
    by: dict[int, list[LeaseWrite]] = defaultdict(list)
    for w in sorted(writes, key=lambda w: w.time):
        by[w.shard].append(w)
    out: dict[int, list[Span]] = {}
    for shard, ws in by.items():
        spans: list[Span] = []
        for w, nxt in zip(ws, [*ws[1:], None], strict=True):
            if w.holder is None:
                continue
            stop = min(w.time + w.duration, nxt.time if nxt else end, end)
            if spans and spans[-1][2] == w.holder and w.time <= spans[-1][1]:
                spans[-1] = (spans[-1][0], stop, w.holder)
            else:
                spans.append((w.time, stop, w.holder))
        out[shard] = spans
    return out


def _max_overlap(spans: list[Span]) -> int:
    """The most distinct replicas whose spans cover one moment."""
    edges = sorted([(a, 1, r) for a, _, r in spans] + [(b, -1, r) for _, b, r in spans])
    live: dict[str, int] = defaultdict(int)
    best = 0
    for _, step, replica in edges:  # ends sort before starts at the same moment
        live[replica] += step
        best = max(best, sum(1 for n in live.values() if n > 0))
    return best


def _gaps(spans: list[Span], end: float) -> list[tuple[float, float]]:
    """The unowned stretches after the first holder, up to `end`."""
    out: list[tuple[float, float]] = []
    if not spans:
        return out
    covered = spans[0][1]
    for a, b, _ in spans[1:]:
        if a > covered:
            out.append((covered, a))
        covered = max(covered, b)
    if end > covered:
        out.append((covered, end))
    return out


def _holder_at(spans: list[Span], at: float) -> str | None:
    for a, b, replica in spans:
        if a <= at <= b:
            return replica
    return None


def handover_seconds(writes: list[LeaseWrite], replica: str, at: float) -> float | None:
    """From `at` (the replica's SIGTERM or kill) until another replica had acquired every
    shard `replica` held then; None if one was never taken over."""
    held = {}
    for w in sorted(writes, key=lambda w: w.time):
        if w.time <= at:
            held[w.shard] = w.holder
    mine = [s for s, h in held.items() if h == replica]
    if not mine:
        return 0.0
    taken = []
    for shard in mine:
        first = next(
            (
                w.time
                for w in sorted(writes, key=lambda w: w.time)
                if w.shard == shard and w.time > at and w.holder not in (None, replica)
            ),
            None,
        )
        if first is None:
            return None
        taken.append(first - at)
    return max(taken)


def check(
    writes: list[LeaseWrite],
    acts: list[Act],
    targets: list[str],
    shards: int,
    *,
    lease_duration: float,
    renew_deadline: float,
    deaths: dict[str, float],
    start: float,
    end: float,
) -> dict[str, Any]:
    """The proof's figures over [start, end] (see the module docstring)."""
    writes = sorted(writes, key=lambda w: w.time)
    claimed = claims(writes, renew_deadline, deaths, end)
    held = holders(writes, end)
    shard_targets: dict[int, list[str]] = defaultdict(list)
    for t in targets:
        shard_targets[shard_of(t, shards)].append(t)
    max_owners = max((_max_overlap(claimed.get(s, [])) for s in range(shards)), default=0)
    longest_gap = 0.0
    unowned_targets = 0
    for s in range(shards):
        spans = held.get(s, [])
        gaps = [(a, b) for a, b in _gaps(spans, end) if b > start]
        if not spans:
            gaps = [(start, end)]
        worst = max((b - max(a, start) for a, b in gaps), default=0.0)
        longest_gap = max(longest_gap, worst)
        if worst > lease_duration:
            unowned_targets += len(shard_targets[s])
    outside = [
        a for a in acts if _holder_at(held.get(shard_of(a.target, shards), []), a.time) != a.sender
    ]
    late = [
        lateness
        for a in outside
        if (lateness := _late_by(writes, shard_of(a.target, shards), a)) is not None
    ]
    # Per target, the span from the first to the last act of each replica's tenure.
    spans_of: dict[str, dict[tuple[str, int], tuple[float, float]]] = defaultdict(dict)
    for a in acts:
        key = (a.sender, _tenure(writes, shard_of(a.target, shards), a.sender, a.time))
        first, last = spans_of[a.target].get(key, (a.time, a.time))
        spans_of[a.target][key] = (min(first, a.time), max(last, a.time))
    twice = sorted(t for t, spans in spans_of.items() if _overlap(spans))
    return {
        "max_owners_per_target": max_owners,
        "longest_unowned_seconds": round(longest_gap, 2),
        "targets_unowned_longer_than_lease": unowned_targets,
        "acts": len(acts),
        "acts_by_replica": dict(sorted(_count(a.sender for a in acts).items())),
        "acts_outside_ownership": len(outside),
        "late_writes": len(late),
        "late_writes_max_seconds": round(max(late), 2) if late else None,
        "targets_acted_on_by_two": len(twice),
        "targets_acted_on_by_two_examples": twice[:5],
        "holders": {
            str(s): [[round(a - start, 2), round(b - start, 2), r] for a, b, r in held.get(s, [])]
            for s in range(shards)
        },
    }


def _late_by(writes: list[LeaseWrite], shard: int, act: Act) -> float | None:
    """How long after its sender's own Lease record ran out `act` arrived, when the last
    write of the shard's Lease before it was that sender's acquire or renewal."""
    last = None
    for w in writes:  # in time order
        if w.time > act.time:
            break
        if w.shard == shard:
            last = w
    if last is None or last.holder != act.sender or last.sender != act.sender:
        return None
    return act.time - (last.time + last.duration)


def _tenure(writes: list[LeaseWrite], shard: int, replica: str, at: float) -> int:
    """Which of `replica`'s tenures of `shard` `at` falls in: the number of times it had
    acquired the shard (from another holder or from nobody) by then; 0: never."""
    tenure, holder = 0, None
    for w in writes:  # in time order
        if w.time > at:
            break
        if w.shard != shard:
            continue
        if w.holder == replica and holder != replica:
            tenure += 1
        holder = w.holder
    return tenure


def _overlap(spans: dict[tuple[str, int], tuple[float, float]]) -> bool:
    """Two replicas' spans of acts on one target intersect."""
    items = list(spans.items())
    for i, ((who, _), (a0, a1)) in enumerate(items):
        for (other, _), (b0, b1) in items[i + 1 :]:
            if who != other and a0 <= b1 and b0 <= a1:
                return True
    return False


def _count(items: Iterable[str]) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for item in items:
        out[item] += 1
    return out
