"""Jarvis as an MCP server: the user's other agents (Claude, Cursor, VS Code...) call Jarvis's tools and ask Jarvis,
each as a named client with its own token, every call under Jarvis's own policy, taint rules, confirmations and
ledger. clients.py: who may call; offer.py: what is offered and how a call runs; protocol.py: the MCP SDK's server
over stdio and streamable HTTP."""
