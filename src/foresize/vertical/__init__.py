"""The disruption worker (pure planning): in-place resize, stall fallback, batching,
circuit breaker, capacity guard."""
