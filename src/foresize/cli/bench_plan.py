"""`foresize bench plan` (not yet built)."""
