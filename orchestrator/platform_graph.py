"""The graph for LangGraph's own server (`langgraph dev`, LangGraph Studio, a LangGraph deployment): langgraph.json
names `orchestrator.platform_graph:graph`.

Built once, when the server imports this module (it does so in a worker thread, where reading the config and
opening SQLite may block). A factory function called per run, as before, built the whole graph inside the server's
event loop on every request: `langgraph dev` refused it (a blocking os.mkdir) unless started with --allow-blocking.
The platform supplies persistence, so the graph has no checkpointer of its own.
"""

from __future__ import annotations

from .app import App

graph = App(checkpointer=False).graph
