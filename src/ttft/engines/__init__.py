"""Everything ttft knows about each engine: one folder per kind (``engines/<kind>/``), the one
registry of kinds, the shared flag-table and command-line parsing, metric mapping, control
endpoints (``control.py``) and the process that runs an engine ttft starts."""
