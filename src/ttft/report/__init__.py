"""Terminal tables, JSON/CSV, Markdown."""
