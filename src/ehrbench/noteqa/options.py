"""The order a noteqa trial shows a multiple-choice question's options in. Trial 0 shows them in the file's order,
as EHRNoteQA's evaluation does (its number is the published protocol's); trial k ≥ 1 shows a permutation drawn from
`keyed_rng(seed, "noteqa-options", task id, k)`, so a run of several trials measures position bias (accuracy by the
shown position of the correct option) on the same questions, the same for the same seed."""

from __future__ import annotations

from dataclasses import replace

from ehrbench.noteqa.published import LETTERS
from ehrbench.seeding import keyed_rng
from ehrbench.tasks import EvalTask


def for_trial(task: EvalTask, trial: int) -> EvalTask:
    """`task` as trial `trial` shows it: its options permuted (view.choices, view.option_order: the file position of
    each shown option) and the gold letter moved with them. Other tasks, and trial 0, are returned unchanged."""
    view = task.view
    if view.qa_format != "multichoice" or trial == 0 or len(view.choices) != len(LETTERS):
        return task
    order = tuple(int(i) for i in keyed_rng(view.option_seed or 0, "noteqa-options", view.task_id,
                                            str(trial)).permutation(len(LETTERS)))
    correct = LETTERS.index(task.gold.published_answer)
    return EvalTask(replace(view, choices=tuple(view.choices[i] for i in order), option_order=order),
                    replace(task.gold, published_answer=LETTERS[order.index(correct)]))


def order_label(order: tuple[int, ...] | None) -> str | None:
    """The shown order as the file's letters ("CABED": the file's option C shown first); None: the file's order."""
    return None if order is None else "".join(LETTERS[i] for i in order)
