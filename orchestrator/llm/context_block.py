"""How the context Jarvis adds to the user's latest message is marked in the prompt ([21] x [25]).

The attachments and the remembered facts change with every message. In the system prompt they made every turn's
prompt differ from its first tokens, so a server's prefix cache (llama.cpp, Ollama, vLLM) reused nothing; so they
follow the user's latest message instead (chat/turn_context.py), after this marker. A model server's handler that
reads the request's words (llm/llama_handler.py ranks its function list by them) reads only what comes before it.
"""

from __future__ import annotations

CONTEXT_MARKER = "\n\n[Context Jarvis adds to this message; not typed by the user]\n"


def own_words(text: str) -> str:
    """The user's own words of a message that may carry Jarvis's context block."""
    return text.split(CONTEXT_MARKER, 1)[0]
