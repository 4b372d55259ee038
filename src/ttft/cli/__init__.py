"""Command-line front end: one small module per command. Nothing imports this package."""
