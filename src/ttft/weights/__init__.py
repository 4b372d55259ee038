"""Integrity of weight files (safetensors, GGUF, checksum manifests). Standalone."""
