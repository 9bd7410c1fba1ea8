"""`foresize bench recommend` (not yet built)."""
