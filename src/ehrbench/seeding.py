"""Seeded generators keyed by names: every random choice of a build (question generation, error injection) draws
from a generator seeded by the build seed and the names of what it is for (a template id, a question id, a task and
sub-type), so that one choice never shifts another and the manifest's seed reproduces them all."""

from __future__ import annotations

import hashlib

import numpy as np


def stable_int(text: str) -> int:
    """A 64-bit integer of `text` that is the same in every process (unlike hash())."""
    return int.from_bytes(hashlib.sha1(text.encode()).digest()[:8], "big")


def keyed_rng(seed: int, *keys: str) -> np.random.Generator:
    return np.random.default_rng([seed, *(stable_int(key) for key in keys)])
