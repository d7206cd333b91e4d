"""How FHIR-AgentBench's gold made by `ehrbench.fhir.agentbench_gold` compares with a published question file's: exact
id sets, Jaccard, ids missing and extra by type, equal answers; and what `ehrbench fhir ground` prints."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ehrbench.fhir.agentbench_gold import AgentBenchGold

# Where the result may differ from the published file, and why (printed with the agreement figures).
ASSUMED = (
    "literals match on lower-cased, trimmed text (FHIR-AgentBench turns each into the first raw value it maps to, "
    "via files it does not publish)",
    "chartevents is the demo's reconstruction (see the data README): ids of rows it lacks cannot be made, and a "
    "query grouping rows without aggregating them (`SELECT chartevents.* … GROUP BY day`) returns the row of each "
    "group that SQLite meets last, which depends on the file's row order",
)


@dataclass
class Agreement:
    """How our gold compares with a published `true_fhir_ids` on the questions both have."""
    compared: int = 0
    exact: int = 0
    jaccard_sum: float = 0.0
    only_published: list[str] = field(default_factory=list)  # questions we do not keep
    only_ours: list[str] = field(default_factory=list)
    missing: dict[str, int] = field(default_factory=dict)  # published ids we lack, by type
    extra: dict[str, int] = field(default_factory=dict)  # our ids the published gold lacks, by type
    differing: list[str] = field(default_factory=list)
    answers_compared: int = 0
    answers_equal: int = 0

    @property
    def exact_share(self) -> float:
        return self.exact / self.compared if self.compared else 0.0

    @property
    def mean_jaccard(self) -> float:
        return self.jaccard_sum / self.compared if self.compared else 0.0

    def to_dict(self) -> dict:
        return {"compared": self.compared, "exact": self.exact, "exact_share": round(self.exact_share, 4),
                "mean_jaccard": round(self.mean_jaccard, 4), "only_published": len(self.only_published),
                "only_ours": len(self.only_ours), "missing_ids": self.missing, "extra_ids": self.extra,
                "answers_compared": self.answers_compared, "answers_equal": self.answers_equal}


def agreement(golds: Iterable[AgentBenchGold], published: Mapping[str, Mapping[str, Sequence[str]]],
              published_answers: Mapping[str, Sequence[Sequence]] | None = None) -> Agreement:
    """Compare kept questions with the published gold (question id -> type -> ids) over the questions of the same
    split: exact match of the whole id set, Jaccard (1 when both are empty), ids missing and extra by type; and, given
    the published answer rows, how many answers are equal (`same_answer`)."""
    result = Agreement()
    ours = {g.question_id: g for g in golds if g.dropped is None}
    considered = {g.question_id for g in golds}
    for question_id, theirs in published.items():
        if question_id not in considered:
            continue  # another split
        gold = ours.get(question_id)
        if gold is None:
            result.only_published.append(question_id)
            continue
        result.compared += 1
        if published_answers is not None and question_id in published_answers:
            result.answers_compared += 1
            result.answers_equal += same_answer(gold.answer or [], published_answers[question_id])
        mine_pairs = {(t, i) for t, values in gold.ids.items() for i in values}
        their_pairs = {(t, i) for t, values in theirs.items() for i in values}
        union = mine_pairs | their_pairs
        result.jaccard_sum += len(mine_pairs & their_pairs) / len(union) if union else 1.0
        if mine_pairs == their_pairs:
            result.exact += 1
            continue
        result.differing.append(question_id)
        for kind, _ in their_pairs - mine_pairs:
            result.missing[kind] = result.missing.get(kind, 0) + 1
        for kind, _ in mine_pairs - their_pairs:
            result.extra[kind] = result.extra.get(kind, 0) + 1
    result.only_ours = sorted(set(ours) - set(published))
    return result



def same_answer(ours: Sequence[Sequence], published: Sequence[Sequence]) -> bool:
    """Equal rows, cell by cell: numbers within the 8 significant digits numpy prints, text trimmed and
    case-insensitively (ours is lower-cased, trimmed text, the published raw text), a missing value as None or NaN."""
    if len(ours) != len(published):
        return False
    for mine, theirs in zip(ours, published, strict=True):
        if len(mine) != len(theirs):
            return False
        for a, b in zip(mine, theirs, strict=True):
            a, b = (None if isinstance(v, float) and math.isnan(v) else v for v in (a, b))
            if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
                if not math.isclose(a, b, rel_tol=1e-7, abs_tol=1e-7):
                    return False
            elif _text(a) != _text(b):
                return False
    return True


def _text(value: object) -> str | None:
    return None if value is None else str(value).strip().casefold()



def summary_lines(golds: Sequence[AgentBenchGold], compared: Agreement | None = None) -> list[str]:
    """What `ehrbench fhir ground` prints: questions kept and why the others are not, ids by type, agreement."""
    kept = [g for g in golds if g.dropped is None]
    reasons: dict[str, int] = {}
    for gold in golds:
        if gold.dropped:
            reason = gold.dropped.split(":")[0]
            reasons[reason] = reasons.get(reason, 0) + 1
    by_type: dict[str, int] = {}
    for gold in kept:
        for kind, values in gold.ids.items():
            by_type[kind] = by_type.get(kind, 0) + len(values)
    lines = [f"questions: {len(golds)}, kept {len(kept)} ({sum(bool(g.ids) for g in kept)} with ids, "
             f"{sum(not g.ids for g in kept)} with none)",
             "not kept: " + (", ".join(f"{r} {n}" for r, n in sorted(reasons.items(), key=lambda i: -i[1]))
                             or "none"),
             "ids by type: " + (", ".join(f"{t} {n}" for t, n in sorted(by_type.items())) or "none"),
             f"ids made but not in the view (pruned): {sum(g.pruned for g in kept)}"]
    if compared is not None:
        def by_kind(counts: dict[str, int]) -> str:
            return ", ".join(f"{k} {n}" for k, n in sorted(counts.items())) or "none"
        lines += [f"agreement with the published true_fhir_ids: {compared.exact} of {compared.compared} questions "
                  f"exact ({compared.exact_share:.1%}), mean Jaccard {compared.mean_jaccard:.4f}",
                  f"  answers equal to the published true_answer: {compared.answers_equal} of "
                  f"{compared.answers_compared}",
                  f"  published questions we do not keep: {len(compared.only_published)}; kept questions the "
                  f"published file lacks: {len(compared.only_ours)}",
                  f"  published ids we lack, by type: {by_kind(compared.missing)}",
                  f"  our ids the published gold lacks, by type: {by_kind(compared.extra)}"]
        if compared.differing:
            lines.append("  differing: " + ", ".join(compared.differing[:10])
                         + (" …" if len(compared.differing) > 10 else ""))
        lines += [f"  assumed: {note}" for note in ASSUMED]
    return lines
