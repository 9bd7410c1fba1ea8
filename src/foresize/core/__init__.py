"""The functional core: plans from a snapshot, a clock value and state; does no I/O and reads
no wall clock. Both shells run it. Nothing here imports anything outside `foresize.core`."""
