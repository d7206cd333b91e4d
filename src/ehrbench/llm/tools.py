"""Choosing a tool-calling model by spec, as `chat_model` does for plain chat: `openai:<model>`,
`openai:<model>@<base_url>` (any OpenAI-compatible server) or `gemini:<model>`.

The interface the models share is in tool_chat, the provider adapters in openai_tools and gemini_tools, list prices
in prices; this module only picks the adapter a spec names.
"""

from __future__ import annotations

from ehrbench.llm.chat import ModelSpec
from ehrbench.llm.gemini_tools import GeminiToolChat
from ehrbench.llm.openai_tools import OpenAIToolChat
from ehrbench.llm.tool_chat import ToolChatModel


def tool_chat_model(spec: str, *, api_key: str | None = None, timeout_s: float = 60.0,
                    max_retries: int = 4) -> ToolChatModel:
    """The tool-calling model a spec names: `openai:<model>`, `openai:<model>@<base_url>` or `gemini:<model>`."""
    parsed = ModelSpec.parse(spec)
    if parsed.provider == "gemini":
        return GeminiToolChat(parsed.model, api_key=api_key, timeout_s=timeout_s, max_retries=max_retries)
    return OpenAIToolChat(parsed.model, base_url=parsed.base_url, api_key=api_key, timeout_s=timeout_s,
                          max_retries=max_retries)
