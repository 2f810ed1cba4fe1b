"""Static tools. Each module builds LangChain tools carrying their ToolMeta (see base.py); none imports orchestrator."""
