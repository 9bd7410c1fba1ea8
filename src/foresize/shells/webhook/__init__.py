"""The admission webhook shell: the HTTPS server around the pure decisions in
`foresize.core.admission`.

`server` (aiohttp HTTPS, AdmissionReview in and out), `certs` (TLS material and the TLS
Secret), `configurations` (the webhook configurations and the names of their Service and
Secret), `state_file` (the cluster view of `foresize webhook --state FILE`). The operator
(`foresize.shells.kube`) serves the same app.
"""
