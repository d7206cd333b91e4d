"""Ranking a column's stored values by how close they are to what the model typed, for value_similarity_search:
lexically (rapidfuzz, the default, offline) or by embeddings (when an embedding model is configured: EHR-ChatQA's
tool is embedding-based). The curated synonym table (lay terms, brand names) is an explicit option, off by default:
the chatqa instructions are written from that table, so a search that knows it would hand the agent the mapping the
task tests. `mode` names how a toolbox ranks (the results' `value_search` column).
"""

from __future__ import annotations

from functools import cache

import numpy as np
from rapidfuzz import fuzz, process, utils

from ehrbench.llm.chat import Embedder
from ehrbench.questions.chatqa import LayTerms, load_lay_terms

CURATED = "curated"  # the synonym table: ehrbench.questions' lay_terms.yaml and brand_generic.yaml

# Lexical score = the max of three rapidfuzz scores on lower-cased, punctuation-free text, each weighted by how much
# it says about a match, so that the order is: the same value (1.0) > all the query's words in the value (0.95) >
# the query inside the value (0.9 at most) > typos, which `ratio` (normalised edit distance) scores smoothly.
# partial_ratio counts only for values at least as long as the query: the other way round it would rate any short
# value found inside the query ("hiccough" in "high cough") as a near match.
# JaroWinkler is left out on purpose: its prefix bonus rates any short value sharing a prefix ("hypo..." for
# "hyper...") close to an exact match, which is the wrong kind of near-miss for clinical terms.
# Equal scores are ordered by `ratio` (the closer whole string first: "essential hypertension" before the long
# titles that contain it), then by value.
WHOLE, ALL_WORDS, INSIDE = 1.0, 0.95, 0.9


@cache
def curated_synonyms() -> LayTerms:
    return load_lay_terms()


def _normal(text: str) -> str:
    return " ".join(text.lower().split())


class ValueSimilarity:
    """`rank` scores candidates 0..1 against a query. `embedder`: when given, the score is the cosine similarity of
    the embeddings (as the published tool ranks), else the lexical score. `synonyms`: None (the default), the
    curated table (CURATED) or another LayTerms; a value the table gives for the query scores 1."""

    def __init__(self, synonyms: LayTerms | str | None = None, embedder: Embedder | None = None):
        self.synonyms = curated_synonyms() if synonyms == CURATED else synonyms
        if self.synonyms is not None and not isinstance(self.synonyms, LayTerms):
            raise ValueError(f"synonyms must be LayTerms, None or {CURATED!r}, got {synonyms!r}")
        self.embedder = embedder
        self._stored_for_name = _synonym_index(self.synonyms) if self.synonyms else {}
        # Vectors by text: a column's values are embedded once per toolbox, whichever query asks about them.
        self._vectors: dict[str, np.ndarray] = {}

    @property
    def mode(self) -> str:
        """lexical | embedding, with +synonyms when the synonym table is on."""
        return ("embedding" if self.embedder is not None else "lexical") + ("+synonyms" if self.synonyms else "")

    def synonym_values(self, query: str) -> frozenset[str]:
        """The stored values (lower case) the synonym table gives for `query` as a lay term, abbreviation or drug
        name (brand -> generic names, generic -> brand)."""
        return self._stored_for_name.get(_normal(query), frozenset())

    def synonym_hits(self, query: str, candidates: list[str]) -> set[str]:
        stored = self.synonym_values(query)
        return {candidate for candidate in candidates if _normal(candidate) in stored}

    def rank(self, query: str, candidates: list[str], k: int) -> list[tuple[str, float]]:
        """The k best (candidate, score) pairs, best first."""
        candidates = sorted(set(candidates))
        if not candidates or k < 1:
            return []
        scores, whole = _lexical(query, candidates)
        if self.embedder is not None:
            scores = self._cosine(query, candidates)  # lexical closeness still orders equal cosines
        hits = self.synonym_hits(query, candidates)
        scores = np.round(scores, 4)
        for position, candidate in enumerate(candidates):
            if candidate in hits:
                scores[position] = 1.0
        # candidates are sorted, so a stable sort on (score, whole) leaves ties in value order
        order = np.lexsort((-whole, -scores))[:k]
        return [(candidates[i], float(scores[i])) for i in order]

    def _cosine(self, query: str, candidates: list[str]) -> np.ndarray:
        """Cosine similarity (negative taken as 0) of the query with each candidate; the query and the candidates
        not embedded before go to the embedder in one call."""
        new = [text for text in candidates if text not in self._vectors]
        vectors = [np.asarray(v, dtype=float) for v in self.embedder.embed([query, *new])]
        if len(vectors) != len(new) + 1:
            raise ValueError(f"the embedder returned {len(vectors)} vectors for {len(new) + 1} texts")
        self._vectors.update(zip(new, vectors[1:], strict=True))
        query_vector = vectors[0]
        matrix = np.stack([self._vectors[text] for text in candidates])
        norms = np.linalg.norm(matrix, axis=1) * np.linalg.norm(query_vector)
        with np.errstate(divide="ignore", invalid="ignore"):
            cosine = np.where(norms > 0, matrix @ query_vector / norms, 0.0)
        return np.clip(cosine, 0.0, 1.0)


def _lexical(query: str, candidates: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """The lexical scores (0..1) of the candidates, and their whole-string `ratio` for ordering ties."""
    query = utils.default_process(query)
    texts = [utils.default_process(candidate) for candidate in candidates]

    def score(scorer) -> np.ndarray:
        return process.cdist([query], texts, scorer=scorer, workers=1, dtype=np.float64)[0] / 100.0

    whole = score(fuzz.ratio)
    long_enough = np.fromiter((len(text) >= len(query) for text in texts), dtype=bool, count=len(texts))
    inside = np.where(long_enough, score(fuzz.partial_ratio), 0.0)
    return np.maximum.reduce([WHOLE * whole, ALL_WORDS * score(fuzz.token_set_ratio), INSIDE * inside]), whole


def _synonym_index(lay_terms: LayTerms) -> dict[str, frozenset[str]]:
    """Normalised name -> the stored values (normalised) it stands for."""
    index: dict[str, set[str]] = {}

    def add(name: str, values: tuple[str, ...]) -> None:
        index.setdefault(_normal(name), set()).update(_normal(v) for v in values)

    for entries in lay_terms.terms.values():
        for term in entries:
            for name in (term.lay, *term.also):
                add(name, term.values)
    for pair in lay_terms.brands:
        add(pair.brand, pair.generic_names)
        for generic in pair.generic_names:
            add(generic, (pair.brand,))
    return {name: frozenset(values) for name, values in index.items()}
