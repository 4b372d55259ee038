"""Rendering for people and programs: terminal tables, JSON/CSV, Markdown, SARIF."""
