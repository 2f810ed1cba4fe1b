"""The built-in backend's tool-call handlers, one per model family, and `chat_format: jarvis-tools`, which picks one
from the loaded GGUF's metadata.

A model writes tool calls well only in the format it was trained on: Qwen2 models in their template's <tool_call>
blocks (llm/qwen_handler.py), SmolLM2 in the ChatML convention of llm/llama_handler.py. `jarvis-tools` reads
`general.architecture` and the chat template llama.cpp parsed from the GGUF: a qwen2 model whose template renders
<tool_call> gets the Qwen handler, any other the ChatML one. Imported only inside the embedded server's child
process (orchestrator/llm/embedded.py), as the handlers import llama_cpp.
"""

from __future__ import annotations

from typing import Any

from llama_cpp.llama_chat_format import register_chat_completion_handler

from orchestrator.llm import llama_handler, qwen_handler

NAME = "jarvis-tools"


def family(metadata: dict[str, Any] | None) -> str:
    """The handler's name for a GGUF's metadata (llama.cpp's `Llama.metadata`)."""
    metadata = metadata or {}
    template = metadata.get("tokenizer.chat_template") or ""
    if metadata.get("general.architecture") == "qwen2" and qwen_handler.OPEN in template:
        return qwen_handler.NAME
    return llama_handler.NAME


register_chat_completion_handler(qwen_handler.NAME)(qwen_handler.jarvis_qwen_tools)


@register_chat_completion_handler(NAME)
def jarvis_tools(llama: Any, **kwargs: Any) -> Any:
    if family(getattr(llama, "metadata", None)) == qwen_handler.NAME:
        return qwen_handler.jarvis_qwen_tools(llama, **kwargs)
    return llama_handler.jarvis_chatml_tools(llama, **kwargs)
