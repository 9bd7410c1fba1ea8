"""Test infrastructure that ships with the package: a strict Kubernetes API server
(`foresize.testing.apiserver`) used by the kube-shell tests and by `foresize bench chaos`.

Its validators need the `testing` extra (`pip install 'foresize[testing]'`: jsonschema,
kubernetes-validate, cel-expr-python)."""
