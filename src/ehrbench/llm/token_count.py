"""Input tokens of a chat as FHIR-AgentBench counts them before every model call (glee4810/FHIR-AgentBench
utils/core_utils.py `count_tokens_in_messages`, limit 32,000): tiktoken's cl100k_base over each message's content,
plus 4 per message and 2 for the reply's priming; tool-call arguments are not counted.

bpe-openai carries the cl100k_base tables in its wheel (tiktoken downloads them at run time, which this machine
cannot). It refuses texts over 10^6 characters and 2·10^5 tokens at once, so long texts are counted in pieces cut
after a newline (or a space): a cut inside a run of whitespace could move the count by one token, never more."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from functools import cache

PER_MESSAGE = 4
PRIMING = 2
_PIECE_CHARS = 40_000  # at most 4 tokens per character (UTF-8 bytes): under bpe-openai's 200,000-token limit


@cache
def _encoding():
    import bpe_openai  # imported on first use: only the FHIR-AgentBench agents count tokens

    return bpe_openai.get_encoding("cl100k_base")


def count_text(text: str) -> int:
    """cl100k_base tokens of `text` (special-token text counted as ordinary text)."""
    encoding = _encoding()
    return sum(len(encoding.encode_ordinary(piece)) for piece in _pieces(text))


def count_messages(messages: Iterable[dict]) -> int:
    """The input tokens of a chat by FHIR-AgentBench's rule."""
    total = PRIMING
    for message in messages:
        content = message.get("content")
        total += PER_MESSAGE + (count_text(str(content)) if content else 0)
    return total


def _pieces(text: str) -> Iterator[str]:
    start = 0
    while len(text) - start > _PIECE_CHARS:
        window = text[start:start + _PIECE_CHARS]
        cut = max(window.rfind("\n"), window.rfind(" "))
        end = start + (cut + 1 if cut > 0 else _PIECE_CHARS)
        yield text[start:end]
        start = end
    if start < len(text):
        yield text[start:]
