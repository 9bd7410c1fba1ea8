"""Domain objects the core reasons about, Kubernetes' QoS and scheduler-charge rules, the
Action types and the Cluster port that both shells (kube, sim) implement. No I/O here."""
