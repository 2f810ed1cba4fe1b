"""Jorbs: long-running tasks that write small scripts against the `jarvis` capability namespace, wait for
people's replies for hours, and resume from their checkpoint when a message arrives (seed 000).

A jorb is a thread `jorb:<id>` of the jorb graph (graph.py) in the shared checkpointer plus a row in the
jorbs table (models.py). service.py is the API the CLI, the server, the chat tool and the scheduler use.
"""
