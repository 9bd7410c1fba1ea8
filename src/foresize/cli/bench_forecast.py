"""`foresize bench forecast` (not yet built)."""
