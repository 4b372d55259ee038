"""Text Generation Inference: adapter and metric names (no flag table yet)."""
