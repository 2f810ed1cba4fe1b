"""Static tools. Each module builds LangChain tools carrying Jarvis metadata (see base.py); none imports orchestrator."""
