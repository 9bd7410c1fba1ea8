"""AdmissionReview decisions (pure) and the HTTPS webhook server.

Pure parts (no I/O): `index` (what the webhooks look up), `pod` (the pod decision,
`mutate_pod` for core objects), `scale` (the */scale decision), `validate` (target
validation), `review` (AdmissionReview JSON in and out). Shells: `server` (aiohttp
HTTPS), `certs` (TLS and webhook configurations), `state_file` (standalone state),
`sim_hook` (the simulator's admission and scale hooks), `bench` (the benchmark).
"""

from foresize.admission.index import AdmissionIndex
from foresize.admission.pod import MANAGED_ANNOTATION, PodDecision, decide_pod, mutate_pod
from foresize.admission.scale import ScaleDecision, decide_scale

__all__ = [
    "MANAGED_ANNOTATION",
    "AdmissionIndex",
    "PodDecision",
    "ScaleDecision",
    "decide_pod",
    "decide_scale",
    "mutate_pod",
]
