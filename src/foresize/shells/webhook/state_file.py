"""Load the webhook's view of the cluster from a YAML/JSON file, for `foresize webhook
--state FILE` (standalone use without the operator).

The file holds Foresize objects as Kubernetes manifests (several YAML documents, a JSON
list, or a `kind: List`): AIScaleTargets and DaemonSetAutoscalers with their `status`
carrying the suggestions to apply, plus optional Deployments/ReplicaSets/StatefulSets/
DaemonSets/Rollouts for the owner chain, HorizontalPodAutoscalers (the resource an HPA
scales on keeps its template value unless the target overrides), and the cluster-wide
pause: the operator's pause ConfigMap (`foresize-pause`, its `data.paused` and
`data.revert` read as the operator reads them: a revert pauses too) or a
`{kind: ForesizeState, paused: true}` (or `revert: true`) document.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from foresize.adapters.files import load_documents, load_json, read_text
from foresize.core.admission.index import AdmissionIndex
from foresize.core.api.types import parse_object
from foresize.core.cluster.kubejson import hpa_from, workload_from
from foresize.core.cluster.model import HorizontalPodAutoscaler, Workload
from foresize.core.errors import ForesizeError
from foresize.core.lifecycle.planner import PAUSE_CONFIGMAP, pause_flags

log = logging.getLogger("foresize.shells.webhook")

_WORKLOAD_KINDS = (
    "Deployment",
    "StatefulSet",
    "DaemonSet",
    "ReplicaSet",
    "Rollout",
    "CronJob",
    "Job",
)


# The largest state file read: 10,000 targets with their status and workloads fit in well
# under 64 MiB; a bigger file is refused before it is read (it is re-read on every change).
MAX_STATE_BYTES = 64 * 2**20


def _documents(path: Path) -> list[Any]:
    text = read_text(path, max_bytes=MAX_STATE_BYTES, what="state file", regular_only=True)
    if path.suffix == ".json":
        data = load_json(text, str(path))
        docs = data if isinstance(data, list) else [data]
    else:
        docs = load_documents(text, str(path))
        if not docs:
            # What a reload sees between an editor's (or `>`'s) truncate and its write:
            # taken as "no targets", every pod would go unpatched until the next change.
            raise ForesizeError(
                f"{path}: the state file is empty (no YAML document; an empty state is "
                "written `{kind: List, items: []}`)"
            )
    out: list[Any] = []
    for d in docs:
        if isinstance(d, dict) and d.get("kind") == "List":
            out.extend(d.get("items") or [])
        else:
            out.append(d)
    return out


def _workload(kind: str, doc: dict[str, Any], where: str) -> Workload:
    """The kube shell's converter (`kubejson.workload_from`), with one named difference: a
    hand-written state file that gives no namespace means `default`, as `kubectl apply`
    reads it (objects the API server serves always carry theirs)."""
    meta = doc.get("metadata")
    if not isinstance(meta, dict) or not meta.get("namespace"):
        doc = {
            **doc,
            "metadata": {**(meta if isinstance(meta, dict) else {}), "namespace": "default"},
        }
    try:
        return workload_from(kind, doc)
    except (KeyError, TypeError, ValueError) as exc:
        raise ForesizeError(f"{where}: {kind}: {exc}") from None


def _name(doc: dict[str, Any]) -> object:
    meta = doc.get("metadata")
    return meta.get("name") if isinstance(meta, dict) else None


def load_state_file(path: Path | str) -> AdmissionIndex:
    """An `AdmissionIndex` from `path`; `ForesizeError` naming the file, document and
    field for anything it cannot use."""
    path = Path(path)
    targets: list[Any] = []
    dsas: list[Any] = []
    workloads: dict[str, Workload] = {}
    hpas: list[HorizontalPodAutoscaler] = []
    paused = False
    for i, doc in enumerate(_documents(path), start=1):
        where = f"{path} (document {i})"
        if not isinstance(doc, dict):
            raise ForesizeError(f"{where}: expected a mapping, got {type(doc).__name__}")
        kind = doc.get("kind")
        if kind == "ForesizeState":
            paused = bool(doc.get("paused", False)) or bool(doc.get("revert", False))
        elif kind == "ConfigMap" and _name(doc) == PAUSE_CONFIGMAP:
            paused = pause_flags(doc.get("data"))[0]
        elif kind in _WORKLOAD_KINDS:
            wl = _workload(kind, doc, where)
            workloads[wl.key] = wl
        elif kind in ("AIScaleTarget", "DaemonSetAutoscaler"):
            obj = parse_object(doc, where)
            (targets if kind == "AIScaleTarget" else dsas).append(obj)
        elif kind == "HorizontalPodAutoscaler":
            hpas.append(hpa_from(doc))
        elif kind == "ClusterAIScaleTemplate":
            continue  # templates act through the AIScaleTargets they create
        else:
            raise ForesizeError(
                f"{where}: kind: {kind!r} is not AIScaleTarget, DaemonSetAutoscaler, a workload, "
                f"HorizontalPodAutoscaler, ForesizeState or the {PAUSE_CONFIGMAP} ConfigMap"
            )
    return AdmissionIndex.build(
        targets, daemonset_autoscalers=dsas, workloads=workloads, hpas=hpas, paused=paused
    )


# How often the watcher looks at the file: an edit is served within this long.
RELOAD_POLL_SECONDS = 2.0


def _signature(path: Path) -> tuple[int, int, int, int] | None:
    """What changes when the file does: its modification and change times, size and inode
    (a truncate and the write after it can share one mtime tick, not one size; an editor's
    rename-over is a new inode). None while the file is missing."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)


async def watch_state_file(
    path: Path,
    install: Callable[[AdmissionIndex], None],
    *,
    interval: float = RELOAD_POLL_SECONDS,
) -> None:
    """Reload `path` whenever it changes and `install` the new index; never ends on its own.

    Parsing runs in a worker thread (a big file takes a while; the webhook keeps answering
    meanwhile, and the size, alias, depth and number caps live in the loader). A file that
    cannot be used (bad content, empty, not a regular file, unreadable, or a bug of ours)
    is one log line naming it, and the last good state keeps being served: a watcher that
    died would ignore every later edit, good ones included, without a word."""
    last = _signature(path)
    while True:
        await asyncio.sleep(interval)
        current = _signature(path)
        if current is None or current == last:
            continue
        last = current
        try:
            index = await asyncio.to_thread(load_state_file, path)
        except ForesizeError as exc:
            log.error("keeping previous state: %s", exc)
            continue
        except Exception as exc:  # a bug of ours: the watcher must keep watching
            log.error("keeping previous state: %s: %s: %s", path, type(exc).__name__, exc)
            continue
        install(index)
        log.info("reloaded %s", path)
