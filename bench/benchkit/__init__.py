"""Pieces of the bench scripts (``bench/bench_*.py``), kept apart so each script reads as its
measurement plan: the generated ledger history and its builds (``history``), the event-backend
figures beside their raw baselines (``backend_figures``), the MCP clients and server processes
(``mcp_calls``) and the concurrent HTTP load generator (``http_load``).

The scripts run as ``python bench/bench_x.py``, which puts ``bench/`` first on ``sys.path``: that
is how they import this package (it is not installed anywhere).
"""
