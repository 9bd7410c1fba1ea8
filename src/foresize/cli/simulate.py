"""`foresize simulate` (not yet built)."""
