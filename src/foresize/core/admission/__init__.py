"""AdmissionReview decisions (pure, no I/O).

`index` (what the webhooks look up), `pod` (the pod decision, `mutate_pod` for core
objects), `scale` (the */scale decision), `validate` (target validation), `review`
(AdmissionReview JSON in and out). The HTTPS server, certificates, the standalone state
file and the benchmark are the shell in `foresize.shells.webhook`; the simulator's hooks are in
`foresize.shells.sim.admission`.
"""

from foresize.core.admission.index import AdmissionIndex
from foresize.core.admission.pod import MANAGED_ANNOTATION, PodDecision, decide_pod, mutate_pod
from foresize.core.admission.scale import ScaleDecision, decide_scale

__all__ = [
    "MANAGED_ANNOTATION",
    "AdmissionIndex",
    "PodDecision",
    "ScaleDecision",
    "decide_pod",
    "decide_scale",
    "mutate_pod",
]
