"""The OpenAI-compatible front door that applies the outside-the-weights levers."""
