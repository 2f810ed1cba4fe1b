"""JARB, the tool factory, as the chat graph uses it: the subgraph that writes, tests and registers a tool, and the generated-tools provider (the factory itself is jarb_core/)."""
