"""AdmissionReview decisions (pure) and the HTTPS webhook server."""
