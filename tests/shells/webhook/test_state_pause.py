"""`foresize webhook --state` honours the cluster-wide pause as the operator reads it: the
pause ConfigMap's `data.paused` and `data.revert` (a revert pauses too: new pods get their
template values while the operator takes the running ones back), and the `ForesizeState`
document's `paused` / `revert`."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from foresize.core.admission.review import review_pod
from foresize.core.errors import ForesizeError
from foresize.shells.kube.state import ClusterState
from foresize.shells.webhook.state_file import load_state_file
from support.admission import SUG, decode_patch, pod_json, review, target_manifest


def _pause_configmap(**data: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "foresize-pause", "namespace": "foresize-system"},
        "data": data,
    }


def _patched(tmp_path: Path, *extra: dict) -> bool:
    """Whether the webhook serving this state file resizes a new pod of an autonomous
    target with a suggestion."""
    path = tmp_path / "state.yaml"
    path.write_text(yaml.safe_dump_all([target_manifest(suggestion=SUG), *extra]))
    return decode_patch(review_pod(review(pod_json()), load_state_file(path), 0.0)) is not None


@pytest.mark.parametrize(
    ("doc", "patched"),
    [
        (None, True),
        (_pause_configmap(paused="false"), True),
        (_pause_configmap(paused="true"), False),
        (_pause_configmap(revert="true"), False),
        (_pause_configmap(revert="True", paused="false"), False),
        ({"kind": "ForesizeState", "revert": True}, False),
        ({"kind": "ForesizeState", "paused": True}, False),
    ],
)
def test_the_pause_configmap_and_its_revert_hold_admission(
    tmp_path: Path, doc: dict | None, patched: bool
) -> None:
    assert _patched(tmp_path, *([doc] if doc else [])) is patched


@pytest.mark.parametrize(
    "data",
    [{"revert": "true"}, {"paused": "TRUE"}, {"revert": "no", "paused": "false"}, {}],
)
def test_the_state_file_reads_the_configmap_as_the_operator_does(
    tmp_path: Path, data: dict[str, str]
) -> None:
    operator = ClusterState()
    operator.apply_event("ConfigMap", "ADDED", _pause_configmap(**data))
    assert (not _patched(tmp_path, _pause_configmap(**data))) is operator.paused


def test_another_configmap_is_refused_naming_the_document(tmp_path: Path) -> None:
    other = {**_pause_configmap(revert="true"), "metadata": {"name": "app-config"}}
    path = tmp_path / "state.yaml"
    path.write_text(yaml.safe_dump_all([target_manifest(suggestion=SUG), other]))
    with pytest.raises(ForesizeError, match=r"document 2.*foresize-pause ConfigMap"):
        load_state_file(path)


def test_the_operator_reads_the_configmap_it_was_told_to() -> None:
    operator = ClusterState(pause_configmap="my-pause")
    named = {**_pause_configmap(revert="true"), "metadata": {"name": "my-pause", "namespace": "x"}}
    operator.apply_event("ConfigMap", "ADDED", _pause_configmap(paused="true"))
    assert not operator.paused  # the default name is not the one configured
    operator.apply_event("ConfigMap", "ADDED", named)
    assert operator.paused and operator.revert_all
