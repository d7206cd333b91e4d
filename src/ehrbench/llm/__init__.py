"""Language models behind one small interface (chat completions, embeddings) and a response cache."""

from ehrbench.llm.cache import CachedChat, CachedEmbeddings, ResponseCache
from ehrbench.llm.chat import (
    ChatError,
    ChatModel,
    Embedder,
    GeminiChat,
    Message,
    ModelSpec,
    OpenAIChat,
    OpenAIEmbeddings,
    chat_model,
    embedding_model,
)

__all__ = [
    "CachedChat",
    "CachedEmbeddings",
    "ChatError",
    "ChatModel",
    "Embedder",
    "GeminiChat",
    "Message",
    "ModelSpec",
    "OpenAIChat",
    "OpenAIEmbeddings",
    "ResponseCache",
    "chat_model",
    "embedding_model",
]
