"""Paraphrase generated questions, so that agents are not asked in template wording only.

Two paraphrasers share one interface (`paraphrase(question) -> Paraphrase`):
- `OfflineParaphraser` picks one of the template's own wordings (its question or a hand-written phrasing); used
  when no model is configured, and as the LLM paraphraser's fallback.
- `LlmParaphraser` asks a chat model for candidates, rejects those that lose or change a slot value and near-copies
  of the template wording, and keeps the most different of the rest.

Reproducibility: the offline choice is seeded by the build seed and the question id (so it does not depend on the
order of the questions); model replies are cached by prompt, so a rerun gets the same text without HTTP calls.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Protocol

import numpy as np
from pydantic import BaseModel, Field, field_validator
from rapidfuzz import fuzz
from rapidfuzz.utils import default_process

from ehrbench.environment import environment
from ehrbench.llm import (
    CachedChat,
    CachedEmbeddings,
    ChatModel,
    Embedder,
    Message,
    ModelSpec,
    ResponseCache,
    chat_model,
    embedding_model,
)
from ehrbench.questions.generate import GeneratedQuestion
from ehrbench.questions.instantiate import fill_texts
from ehrbench.questions.templates import Template
from ehrbench.seeding import keyed_rng

_TYPOGRAPHIC = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"'})
_CODE_FENCE = re.compile(r"^```[a-z]*\s*|\s*```$")
_LIST_MARKER = re.compile(r"^\s*(?:[-*\u2022]|\d+[.):])\s+")
_SYSTEM_PROMPT = (
    "You paraphrase questions that users ask about a hospital's electronic health records. A paraphrase asks "
    "exactly the same thing in different words. Copy every listed value character for character: do not "
    "translate, reformat, abbreviate, pluralise or change the case of a value, and do not add values. Reply with "
    "a JSON array of strings and nothing else, one paraphrase per string.")


# --- slot check ---------------------------------------------------------------------------------------------------

def missing_slots(text: str, slot_texts: Mapping[str, str]) -> list[str]:
    """The slots whose text does not occur in `text` (case-insensitive, whitespace-normalised). A slot text that
    begins or ends with a letter or digit must be a whole token there: patient 1000 is not in 10009628, 1.5 is not
    in 11.5 or 1.55."""
    normalised = _normalise(text)
    return [slot for slot, slot_text in slot_texts.items() if not _slot_pattern(slot_text).search(normalised)]


def keeps_slots(text: str, slot_texts: Mapping[str, str]) -> bool:
    return not missing_slots(text, slot_texts)


def _normalise(text: str) -> str:
    return " ".join(text.translate(_TYPOGRAPHIC).lower().split())


@lru_cache(maxsize=4096)
def _slot_pattern(slot_text: str) -> re.Pattern[str]:
    text = _normalise(slot_text)
    pattern = re.escape(text)
    if text[:1].isalnum():
        pattern = r"(?<!\w)(?<!\d[.,])" + pattern
    if text[-1:].isalnum():
        pattern += r"(?!\w)(?![.,]\d)"
    return re.compile(pattern)


# --- paraphrasers -------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Paraphrase:
    text: str
    source: str  # offline:<wording index> (0 = the template's question) | llm:<model>
    rejected_lost_slots: int = 0  # candidates that lost or changed a slot value
    rejected_too_similar: int = 0  # candidates too close to the template wording
    fallback_reason: str | None = None  # why an LLM paraphraser fell back to the offline one


class Paraphraser(Protocol):
    def paraphrase(self, question: GeneratedQuestion) -> Paraphrase: ...


class OfflineParaphraser:
    """One of the template's wordings (question or phrasings), drawn per question from a generator seeded by the
    build seed and the question id, filled with the question's slot texts."""

    def __init__(self, templates: Mapping[str, Template], seed: int = 0):
        self._templates = templates
        self.seed = seed

    def paraphrase(self, question: GeneratedQuestion) -> Paraphrase:
        template = self._templates.get(question.template_id)
        if template is None:
            raise ValueError(f"question {question.question_id}: no template {question.template_id!r} among the "
                           f"{len(self._templates)} given to the offline paraphraser")
        wordings = [template.question, *template.phrasings]
        rng = keyed_rng(self.seed, question.question_id)
        index = int(rng.integers(len(wordings)))
        texts = json.loads(question.slot_texts)
        # slot_texts leaves out empty time slots; they read as "" (and the gap is closed) as in the question
        filled = fill_texts(wordings[index], texts)
        return Paraphrase(filled, f"offline:{index}")


class LlmParaphraser:
    """Candidates from a chat model (one request per question, cached by prompt), filtered by `missing_slots` and
    by similarity to the template wording; falls back to `fallback` when no candidate survives."""

    def __init__(self, chat_model: ChatModel, cache: ResponseCache | None, fallback: OfflineParaphraser, *,
                 n_candidates: int = 3, temperature: float = 0.8, max_similarity: float = 90.0,
                 embedder: Embedder | None = None):
        self._chat = CachedChat(chat_model, cache) if cache else chat_model
        self._embedder = CachedEmbeddings(embedder, cache) if embedder and cache else embedder
        self._fallback = fallback
        self.source = f"llm:{chat_model.model}"
        self.n_candidates = n_candidates
        self.temperature = temperature
        self.max_similarity = max_similarity

    def prompt(self, question: GeneratedQuestion) -> list[Message]:
        """Asks for all candidates in one reply rather than with `n`: many compatible servers ignore `n`."""
        wording = question.template_question
        texts = sorted(set(json.loads(question.slot_texts).values()), key=lambda t: _normalise(wording).find(
            _normalise(t)))
        keep = ", ".join(json.dumps(text, ensure_ascii=False) for text in texts) or "(none)"
        return [{"role": "system", "content": _SYSTEM_PROMPT},
                {"role": "user", "content": f"Question: {wording}\nValues to copy exactly: {keep}\n"
                                            f"Write {self.n_candidates} different paraphrases."}]

    def paraphrase(self, question: GeneratedQuestion) -> Paraphrase:
        replies = self._chat.complete(self.prompt(question), temperature=self.temperature)
        candidates = list(dict.fromkeys(c for reply in replies for c in parse_candidates(reply)))
        slot_texts = json.loads(question.slot_texts)
        keeping = [c for c in candidates if keeps_slots(c, slot_texts)]
        scores = similarities(question.template_question, keeping, self._embedder)
        diverse = [(score, c) for score, c in zip(scores, keeping, strict=True) if score <= self.max_similarity]
        lost, too_similar = len(candidates) - len(keeping), len(keeping) - len(diverse)
        if diverse:
            _, best = min(diverse, key=lambda pair: pair[0])
            return Paraphrase(best, self.source, lost, too_similar)
        reason = (f"no candidate kept: {lost} of {len(candidates)} lost a slot value, {too_similar} too similar to "
                  f"the template wording" if candidates else "the reply held no paraphrase")
        offline = self._fallback.paraphrase(question)
        return Paraphrase(offline.text, offline.source, lost, too_similar, reason)


def parse_candidates(reply: str) -> list[str]:
    """Paraphrases from a reply: a JSON array of strings (also fenced, or inside an object), else one per line
    without list markers or quotes; preamble lines ending in ':' are dropped."""
    text = _CODE_FENCE.sub("", reply.strip())
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError:
        parsed = None
    if isinstance(parsed, dict):
        parsed = next((value for value in parsed.values() if isinstance(value, list)), None)
    if isinstance(parsed, list):
        items = [item for item in parsed if isinstance(item, str)]
    else:
        items = [_LIST_MARKER.sub("", line).strip().rstrip(",") for line in text.splitlines()]
    cleaned = (" ".join(item.strip().strip("\"'\u201c\u201d").split()) for item in items)
    return list(dict.fromkeys(item for item in cleaned if item and not item.endswith(":")))


def similarities(reference: str, candidates: list[str], embedder: Embedder | None = None) -> list[float]:
    """How close each candidate is to `reference`, 0-100: rapidfuzz's token-sort ratio of the lower-cased words,
    averaged with 100 x the cosine similarity of their embeddings when an embedder is given."""
    lexical = [fuzz.token_sort_ratio(reference, c, processor=default_process) for c in candidates]
    if embedder is None or not candidates:
        return lexical
    vectors = np.asarray(embedder.embed([reference, *candidates]), dtype=float)
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    cosines = unit[1:] @ unit[0]
    return [(lex + 100 * float(cos)) / 2 for lex, cos in zip(lexical, cosines, strict=True)]



# --- a batch of questions -----------------------------------------------------------------------------------------

@dataclass
class ParaphraseReport:
    questions: int = 0
    accepted: int = 0  # paraphrased by the configured paraphraser itself
    rejected_lost_slots: int = 0  # candidates
    rejected_too_similar: int = 0  # candidates
    fallbacks: int = 0  # questions that got the offline paraphrase instead
    lost_slots: int = 0  # questions whose final text misses a slot text (should stay 0)

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


def paraphrase_questions(questions: list[GeneratedQuestion], paraphraser: Paraphraser) -> ParaphraseReport:
    """Set `question`, `paraphrase_source` and `paraphrase_keeps_slots` of every record (in place; unanswerable
    ones too), from its template wording; a fallback's reason goes to `extra["paraphrase_fallback"]`."""
    report = ParaphraseReport()
    for question in questions:
        result = paraphraser.paraphrase(question)
        question.question = result.text
        question.paraphrase_source = result.source
        question.paraphrase_keeps_slots = keeps_slots(result.text, json.loads(question.slot_texts))
        question.extra.pop("paraphrase_fallback", None)
        if result.fallback_reason:
            question.extra["paraphrase_fallback"] = result.fallback_reason
        report.questions += 1
        report.accepted += result.fallback_reason is None
        report.fallbacks += result.fallback_reason is not None
        report.rejected_lost_slots += result.rejected_lost_slots
        report.rejected_too_similar += result.rejected_too_similar
        report.lost_slots += not question.paraphrase_keeps_slots
    return report


# --- configuration ------------------------------------------------------------------------------------------------

class ParaphraseSettings(BaseModel):
    """How questions are paraphrased; no `model` means the offline phrasings."""

    model: str | None = Field(None, description=(
        "Chat model spec: openai:<model>, openai:<model>@<base_url> or gemini:<model>. Default: "
        "$EHRBENCH_PARAPHRASE_MODEL, else offline phrasings."))
    cache_path: Path = Field(description="SQLite response cache. Default: $EHRBENCH_PARAPHRASE_CACHE, else "
                                         "<data_dir>/cache/llm.sqlite.")
    embedding_model: str | None = Field(None, description=(
        "Embedding model spec (openai:<model>[@<base_url>]) that adds cosine similarity to the diversity filter. "
        "Default: $EHRBENCH_EMBEDDING_MODEL, else lexical similarity only."))
    n_candidates: int = Field(3, ge=1, le=20, description="Paraphrases asked for per question.")
    temperature: float = Field(0.8, ge=0, le=2)
    max_similarity: float = Field(90.0, ge=0, le=100, description="Candidates more similar (0-100) to the "
                                                                  "template wording are near-copies, rejected.")
    seed: int = Field(0, ge=0, description="The build seed (drives the offline choice).")

    @field_validator("model")
    @classmethod
    def _chat_spec(cls, value: str | None) -> str | None:
        return str(ModelSpec.parse(value)) if value else None

    @field_validator("embedding_model")
    @classmethod
    def _embedding_spec(cls, value: str | None) -> str | None:
        if value and ModelSpec.parse(value).provider != "openai":
            raise ValueError(f"{value!r}: only openai:<model>[@<base_url>] endpoints embed")
        return value or None

    @classmethod
    def from_environment(cls, data_dir: Path, environ: Mapping[str, str] | None = None,
                         **overrides) -> ParaphraseSettings:
        """Settings from `overrides` (flow parameters; None or "" = not given), else EHRBENCH_PARAPHRASE_MODEL,
        EHRBENCH_PARAPHRASE_CACHE and EHRBENCH_EMBEDDING_MODEL, else the defaults."""
        env = environment(environ)
        values = {name: value for name, value in overrides.items() if value not in (None, "")}
        for name, value in (("model", env.paraphrase_model), ("cache_path", env.paraphrase_cache),
                            ("embedding_model", env.embedding_model)):
            if name not in values and value:
                values[name] = value
        values.setdefault("cache_path", Path(data_dir) / "cache" / "llm.sqlite")
        return cls(**values)


def paraphraser_from_settings(templates: Mapping[str, Template], settings: ParaphraseSettings) -> Paraphraser:
    """The offline paraphraser, or with a model configured the LLM paraphraser (cached, offline fallback)."""
    offline = OfflineParaphraser(templates, seed=settings.seed)
    if not settings.model:
        return offline
    embedder = embedding_model(settings.embedding_model) if settings.embedding_model else None
    return LlmParaphraser(chat_model(settings.model), ResponseCache(settings.cache_path), offline,
                          n_candidates=settings.n_candidates, temperature=settings.temperature,
                          max_similarity=settings.max_similarity, embedder=embedder)
