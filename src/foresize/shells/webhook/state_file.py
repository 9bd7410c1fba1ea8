"""Load the webhook's view of the cluster from a YAML/JSON file, for `foresize webhook
--state FILE` (standalone use without the operator).

The file holds Foresize objects as Kubernetes manifests (several YAML documents, a JSON
list, or a `kind: List`): AIScaleTargets and DaemonSetAutoscalers with their `status`
carrying the suggestions to apply, plus optional Deployments/ReplicaSets/StatefulSets/
DaemonSets/Rollouts for the owner chain, HorizontalPodAutoscalers (the resource an HPA
scales on keeps its template value unless the target overrides), and an optional
`{kind: ForesizeState, paused: true}` document for the cluster-wide pause.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from foresize.adapters.files import load_documents, load_json, read_text
from foresize.core.admission.index import AdmissionIndex
from foresize.core.api.types import parse_object
from foresize.core.cluster.kubejson import hpa_from
from foresize.core.cluster.model import HorizontalPodAutoscaler, OwnerRef, Workload
from foresize.core.errors import ForesizeError

_WORKLOAD_KINDS = ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Rollout")


# The largest state file read: 10,000 targets with their status and workloads fit in well
# under 64 MiB; a bigger file is refused before it is read (it is re-read on every change).
MAX_STATE_BYTES = 64 * 2**20


def _documents(path: Path) -> list[Any]:
    text = read_text(path, max_bytes=MAX_STATE_BYTES, what="state file")
    if path.suffix == ".json":
        data = load_json(text, str(path))
        docs = data if isinstance(data, list) else [data]
    else:
        docs = load_documents(text, str(path))
    out: list[Any] = []
    for d in docs:
        if isinstance(d, dict) and d.get("kind") == "List":
            out.extend(d.get("items") or [])
        else:
            out.append(d)
    return out


def _workload(doc: dict[str, Any]) -> Workload:
    meta = doc.get("metadata") or {}
    spec = doc.get("spec") or {}
    owner = None
    for ref in meta.get("ownerReferences") or ():
        if ref.get("controller"):
            owner = OwnerRef(kind=str(ref.get("kind")), name=str(ref.get("name")))
    return Workload(
        kind=str(doc["kind"]),
        namespace=str(meta.get("namespace") or "default"),
        name=str(meta.get("name") or ""),
        labels=dict(meta.get("labels") or {}),
        selector=dict((spec.get("selector") or {}).get("matchLabels") or {}),
        replicas=int(spec.get("replicas") or 1),
        owner=owner,
    )


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
            paused = bool(doc.get("paused", False))
        elif kind in _WORKLOAD_KINDS:
            wl = _workload(doc)
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
                "HorizontalPodAutoscaler or ForesizeState"
            )
    return AdmissionIndex.build(
        targets, daemonset_autoscalers=dsas, workloads=workloads, hpas=hpas, paused=paused
    )
