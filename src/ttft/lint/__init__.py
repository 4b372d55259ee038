"""Static checks of prompts, proxy configurations and engine flags."""
