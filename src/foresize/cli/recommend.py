"""`foresize recommend` (not yet built)."""
