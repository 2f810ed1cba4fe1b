"""JARB, the tool factory, as a plain library (no LangGraph): spec, generator, sandbox, registry, loader."""
