"""The kube shell: the same core against a real Kubernetes API server."""
