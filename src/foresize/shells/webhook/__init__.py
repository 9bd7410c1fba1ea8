"""The admission webhook shell: the HTTPS server around the pure decisions in
`foresize.core.admission`.

`server` (aiohttp HTTPS, AdmissionReview in and out), `certs` (TLS material and the webhook
configurations), `state_file` (the cluster view of `foresize webhook --state FILE`),
`bench` (`foresize bench webhook`). The operator (`foresize.shells.kube`) serves the same app.
"""
