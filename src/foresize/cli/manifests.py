"""`foresize manifests` (not yet built)."""
