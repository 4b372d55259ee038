"""ttft.engines.llamacpp.launch."""
