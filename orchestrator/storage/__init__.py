"""Databases: engines and checkpointers (SQLite or PostgreSQL), claims and workers, run telemetry, the off-thread writer."""
