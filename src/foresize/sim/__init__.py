"""The sim shell: a discrete-event simulated cluster with Kubernetes semantics."""
