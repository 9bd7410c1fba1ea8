"""The Foresize API's building blocks: its group and version, the field types every
object uses (durations, quantities, timestamps, enumerations, cron schedules) and the
base models. Part of `foresize.core.api.types` (the facade the rest of Foresize imports)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from decimal import Decimal
from functools import lru_cache
from typing import Annotated, TypeAlias

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    PlainValidator,
    WithJsonSchema,
)
from pydantic_core import ErrorDetails

from foresize.core.api.cron import MAX_CRON_LENGTH, check_cron
from foresize.core.api.duration import (
    DURATION_PATTERN,
    format_duration,
    parse_duration,
    shown,
)
from foresize.core.api.quantity import (
    CPU,
    MEMORY,
    QuantityError,
    format_bytes,
    format_cpu,
    format_resource_map,
    to_canonical,
)
from foresize.core.api.vocabulary import (
    FORECAST_MODES,
    SCALING_MODE_ALIASES,
    SCALING_MODES,
    UPDATE_MODES,
    canonical_word,
)

GROUP = "foresize.io"
VERSION = "v1"
API_VERSION = f"{GROUP}/{VERSION}"

AIScaleTargetKind = "AIScaleTarget"
DaemonSetAutoscalerKind = "DaemonSetAutoscaler"
ClusterAIScaleTemplateKind = "ClusterAIScaleTemplate"
ClusterAIScalePolicyKind = "ClusterAIScalePolicy"

SYSTEM_NAMESPACES = ("kube-system", "kube-public", "kube-node-lease")
"""Namespaces a ClusterAIScaleTemplate never selects unless listed in includedNamespaces."""


def _duration_validator(positive: bool) -> Callable[[object], float]:
    def validate(value: object) -> float:
        seconds = parse_duration(value)
        if positive and seconds <= 0:
            raise ValueError("must be a positive duration (e.g. 60s, 15m)")
        return seconds

    return validate


_DURATION_SCHEMA = {"type": "string", "pattern": DURATION_PATTERN, "maxLength": 64}

Duration = Annotated[
    float,
    PlainValidator(_duration_validator(positive=False)),
    PlainSerializer(format_duration, return_type=str),
    WithJsonSchema(_DURATION_SCHEMA),
]
"""Float seconds; input `15m` / `1h30m` / `8d` / a number of seconds; output `15m`."""

PositiveDuration = Annotated[
    float,
    PlainValidator(_duration_validator(positive=True)),
    PlainSerializer(format_duration, return_type=str),
    WithJsonSchema(_DURATION_SCHEMA),
]


QUANTITY_PATTERN = (
    r"^[+]?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE][+-]?[0-9]+))?$"
)
_QUANTITY_SCHEMA = {
    "anyOf": [{"type": "integer"}, {"type": "string", "pattern": QUANTITY_PATTERN}],
    "x-kubernetes-int-or-string": True,
}


def _quantity_validator(resource: str) -> Callable[[object], int]:
    def validate(value: object) -> int:
        if isinstance(value, bool) or not isinstance(value, str | int | float | Decimal):
            raise ValueError(f"must be a {resource} quantity such as 250m, 1.5, 512Mi")
        try:
            amount = to_canonical(resource, value)
        except QuantityError as exc:
            raise ValueError(str(exc)) from None
        if amount < 0:
            raise ValueError(f"must not be negative, got {value!r}")
        return amount

    return validate


CpuQuantity = Annotated[
    int,
    PlainValidator(_quantity_validator(CPU)),
    PlainSerializer(format_cpu, return_type=str),
    WithJsonSchema(_QUANTITY_SCHEMA),
]
"""Int millicores; input `250m`, `0.5`, `2` (cores, as in a manifest); output `250m` / `2`."""

MemoryQuantity = Annotated[
    int,
    PlainValidator(_quantity_validator(MEMORY)),
    PlainSerializer(format_bytes, return_type=str),
    WithJsonSchema(_QUANTITY_SCHEMA),
]
"""Int bytes; input `512Mi`, `1G`, `1e9`, a number of bytes; output `512Mi`."""


def _validate_resource_map(value: object) -> dict[str, int]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError("must be a map of resource name to quantity")
    out: dict[str, int] = {}
    for name, amount in value.items():
        out[str(name)] = _quantity_validator(CPU if name == CPU else MEMORY)(amount)
    return out


ResourceMap = Annotated[
    dict[str, int],
    PlainValidator(_validate_resource_map),
    PlainSerializer(format_resource_map),
    WithJsonSchema(
        {
            "type": "object",
            "additionalProperties": _QUANTITY_SCHEMA,
            "maxProperties": 16,
        }
    ),
]
"""Resource name -> canonical int (cpu millicores, others base units); output a
Kubernetes `requests`/`limits` map."""


def parse_timestamp(value: object) -> float:
    """RFC 3339 (`2026-11-29T08:00:00Z`) or epoch seconds -> float epoch seconds."""
    if isinstance(value, bool):
        raise ValueError("must be an RFC 3339 time")
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, datetime):
        when = value if value.tzinfo else value.replace(tzinfo=UTC)
        return when.timestamp()
    if isinstance(value, str):
        text = value.strip()
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            when = datetime.fromisoformat(text)
        except ValueError:
            raise ValueError(f"must be an RFC 3339 time, not {value!r}") from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        return when.timestamp()
    raise ValueError("must be an RFC 3339 time")


# A planning pass writes the same times pass after pass (each stall's first sighting, the
# last batch, ...): thousands of them at 10,000 pods, each a datetime and a strftime.
@lru_cache(maxsize=16_384)
def format_timestamp(seconds: float, *, whole_seconds: bool = False) -> str:
    """Epoch seconds -> RFC 3339 in UTC (`2026-11-29T08:00:00Z`; fraction only if any).

    `whole_seconds`: the fraction dropped, for Kubernetes' own times (a `metav1.Time`, such
    as an Event's or kubectl's `restartedAt`, is RFC 3339 to the second)."""
    when = datetime.fromtimestamp(seconds, tz=UTC)
    if when.microsecond and not whole_seconds:
        return when.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


Timestamp = Annotated[
    float,
    PlainValidator(parse_timestamp),
    PlainSerializer(format_timestamp, return_type=str),
    WithJsonSchema({"type": "string", "format": "date-time"}),
]


def one_of(
    allowed: tuple[str, ...], aliases: dict[str, str] | None = None
) -> Callable[[object], str]:
    aliases = aliases or {}
    listed = ", ".join(allowed)
    if aliases:
        listed += " (aliases: " + ", ".join(f"{a}={t}" for a, t in aliases.items()) + ")"

    def validate(value: object) -> str:
        word = canonical_word(value, allowed, aliases)
        if word is None:
            raise ValueError(f"must be one of {listed}, not {value!r}")
        return word

    return validate


def enum_schema(allowed: tuple[str, ...], aliases: dict[str, str] | None = None) -> WithJsonSchema:
    return WithJsonSchema({"type": "string", "enum": list(allowed) + list(aliases or {})})


ScalingMode: TypeAlias = Annotated[
    str,
    PlainValidator(one_of(SCALING_MODES, SCALING_MODE_ALIASES)),
    enum_schema(SCALING_MODES, SCALING_MODE_ALIASES),
]
"""autonomous | recommendation | observe; aliases auto, recommend, rec, observation."""


def normalize_scaling_mode(value: str) -> str:
    """`auto` -> `autonomous`, `rec` -> `recommendation`, ... (raises ValueError if unknown)."""
    return one_of(SCALING_MODES, SCALING_MODE_ALIASES)(value)


ForecastMode: TypeAlias = Annotated[
    str, PlainValidator(one_of(FORECAST_MODES)), enum_schema(FORECAST_MODES)
]

UpdateMode: TypeAlias = Annotated[
    str, PlainValidator(one_of(UPDATE_MODES)), enum_schema(UPDATE_MODES)
]

REPLICAS_MAX = 2**31 - 1
"""Replica counts are int32 in the Kubernetes API (Scale `spec.replicas`, the HPA's
`minReplicas`/`maxReplicas`): a larger one no workload can take (`minReplicas: 10**27` was
accepted offline)."""

SCALABLE_KINDS = ("Deployment", "StatefulSet", "Rollout")
"""The workloads with replicas (a `*/scale` subresource): what a ClusterAIScaleTemplate
creates targets for and what `spec.horizontal` can scale."""
WORKLOAD_KINDS = (*SCALABLE_KINDS, "CronJob", "JobGroup")
"""What a `scaleTargetRef` names. A CronJob's runs, and a JobGroup's (the bare Jobs whose
pods carry `foresize.io/job-group: <name>`), are sized at pod creation from their past
runs' peaks (`recommend.runs`): vertical only, update mode `initial` (`api.jobs`)."""
DEFAULT_API_VERSIONS = {
    "Deployment": "apps/v1",
    "StatefulSet": "apps/v1",
    "DaemonSet": "apps/v1",
    "Rollout": "argoproj.io/v1alpha1",
    "CronJob": "batch/v1",
    "JobGroup": "foresize.io/v1",  # no Kubernetes kind: a label's value (`cluster.jobs`)
}

CRON_PATTERN = r"^(@(yearly|annually|monthly|weekly|daily|midnight|hourly)|(\S+\s+){4}\S+)$"

CronSchedule = Annotated[
    str, Field(max_length=MAX_CRON_LENGTH, pattern=CRON_PATTERN), AfterValidator(check_cron)
]
"""A forecast_cron schedule, checked field by field (`api.cron`), as the webhook does."""

CronShape = Annotated[str, Field(max_length=MAX_CRON_LENGTH, pattern=CRON_PATTERN)]
"""A cron schedule's shape alone (5 fields or a macro), what the CRD schema checks: its
fields are checked where the schedule is read (a maintenance window's in
`cluster.windows.read_maintenance`), so an object that got past the webhook with a field
out of range is still read, and what it gets wrong is said on it, not only logged."""


class StrictModel(BaseModel):
    """Spec types: unknown keys are errors (a typo must not be silently dropped)."""

    model_config = ConfigDict(
        extra="forbid",
        populate_by_name=True,
        use_attribute_docstrings=True,
        validate_assignment=False,
        str_strip_whitespace=False,
    )


class OpenModel(BaseModel):
    """Status / metadata types: unknown keys are kept (other parts persist state there)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True, use_attribute_docstrings=True)


OWN_MESSAGES = ("value_error", "assertion_error", "missing", "extra_forbidden")
"""Error types whose message is ours (or needs no value): pydantic's built-in checks
(`greater_than_equal`, `list_type`, ...) do not say what they got, so `error_message`
adds it."""


def error_message(error: ErrorDetails) -> str:
    """One pydantic error in the words users see (the CLI, the webhook, the handlers)."""
    msg = str(error.get("msg", "invalid"))
    for prefix in ("Value error, ", "Assertion failed, "):
        if msg.startswith(prefix):
            msg = msg[len(prefix) :]
    kind = error.get("type")
    if kind == "extra_forbidden":
        msg = "unknown field"
    elif kind == "missing":
        msg = "required field is missing"
    elif kind == "string_too_short" and error.get("ctx", {}).get("min_length") == 1:
        msg = "required (must not be empty)"
    elif kind not in OWN_MESSAGES and "input" in error:
        msg = f"{msg}, got {shown(error['input'])}"
    return msg
