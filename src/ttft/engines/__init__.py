"""Engine adapters: launch command, Prometheus metrics and their mapping to common names."""
