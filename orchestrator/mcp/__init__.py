"""MCP servers: their TOML files, long-lived sessions with restarts, and the catalog provider of their tools."""
