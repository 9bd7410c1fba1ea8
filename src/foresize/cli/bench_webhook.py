"""`foresize bench webhook` (not yet built)."""
