"""MEDS subject splits of a build: seeded, by subject, in the standard's split names."""

from __future__ import annotations

from collections.abc import Sequence

from ehrbench.seeding import keyed_rng

TRAIN, TUNING, HELD_OUT = "train", "tuning", "held_out"  # meds.train_split, tuning_split, held_out_split
SHARES = ((TRAIN, 0.8), (TUNING, 0.1))  # held_out: the rest


def assign_splits(subjects: Sequence[int], seed: int) -> dict[int, str]:
    """Each subject's split, in the order of `subjects` sorted: a permutation drawn from keyed_rng(seed, "meds-splits")
    puts the first 80 % (rounded down) in train, the next 10 % in tuning and the rest in held_out."""
    ordered = sorted(subjects)
    shuffled = [ordered[i] for i in keyed_rng(seed, "meds-splits").permutation(len(ordered))]
    split_of: dict[int, str] = {}
    start = 0
    for name, share in SHARES:
        end = start + int(len(shuffled) * share)
        split_of.update((subject, name) for subject in shuffled[start:end])
        start = end
    split_of.update((subject, HELD_OUT) for subject in shuffled[start:])
    return {subject: split_of[subject] for subject in ordered}


def splits_frame(subjects: Sequence[int], seed: int):
    """`assign_splits` as the subject_splits dbt models return it: a pandas frame of subject_id and split."""
    import pandas as pd

    splits = assign_splits(subjects, seed)
    return pd.DataFrame({"subject_id": pd.Series(list(splits), dtype="int64"),
                         "split": pd.Series(list(splits.values()), dtype="object")})
