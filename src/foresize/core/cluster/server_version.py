"""What the connected API server can do, decided from its version.

In-place resize (KEP-1287) is reachable through the `pods/resize` subresource from 1.33
(beta, on by default) and GA in 1.35. Before 1.33 there is no subresource: in-place update
modes are refused with a status condition instead of failing every patch. On 1.33 the API
server also refuses to decrease (or add) a container's memory limit unless that container's
memory `resizePolicy` is `RestartContainer`; 1.34+ accepts it (the kubelet may then report
`PodResizeInProgress`/`Error`). These rules live here so the executor and the status writer
agree on them.
"""

from __future__ import annotations

from foresize.core.cluster.actions import ContainerResize
from foresize.core.cluster.model import Pod
from foresize.core.cluster.validation import memory_limit_decrease_refused

INPLACE_MIN_VERSION = (1, 33)
MEMORY_LIMIT_DECREASE_FREE_VERSION = (1, 34)

IN_PLACE_MODES = frozenset({"in_place", "in_place_or_recreate"})

CONDITION_INPLACE_UNSUPPORTED = "InPlaceResizeUnsupported"


def supports_in_place(version: tuple[int, int]) -> bool:
    """True when the server serves `pods/resize` (1.33+)."""
    return tuple(version) >= INPLACE_MIN_VERSION


def in_place_refusal(version: tuple[int, int]) -> str | None:
    """The message to show when in-place modes cannot work on this server, else None."""
    if supports_in_place(version):
        return None
    return (
        f"Kubernetes {version[0]}.{version[1]} has no pods/resize subresource (in-place resize "
        "needs 1.33 or later); update modes in_place and in_place_or_recreate are refused. "
        "Use update_mode recreate or initial, or upgrade the cluster."
    )


def memory_limit_change_refused(
    version: tuple[int, int], pod: Pod | None, change: ContainerResize
) -> str | None:
    """Why the API server of `version` would refuse this container's memory-limit change.

    On 1.33 a memory limit may only go down (or be added) when the container's memory
    resizePolicy is RestartContainer. Returns None when the change is allowed.
    """
    if tuple(version) >= MEMORY_LIMIT_DECREASE_FREE_VERSION or "memory" not in change.limits:
        return None
    container = None
    if pod is not None:
        # Sidecar (restartable init) containers are resized too and follow the same rule.
        sidecars = [c for c in pod.init_containers if c.is_sidecar]
        container = next((c for c in [*pod.containers, *sidecars] if c.name == change.name), None)
    if container is None:
        return None  # unknown pod shape: let the API server decide
    if not memory_limit_decrease_refused(version, container, change.limits["memory"]):
        return None
    what = "added" if "memory" not in container.resources.limits else "decreased"
    return (
        f"container {change.name!r}: memory limit cannot be {what} in place on Kubernetes "
        f"{version[0]}.{version[1]} unless its memory resizePolicy is RestartContainer "
        "(allowed from 1.34)"
    )
