"""The noteqa suite's own rules (ehrbench.noteqa.suite, .options, the ehrnoteqa trial scoring, the oracle): the checks
Great Expectations reads are computed from the notes, the notes export reads back through EHRNoteQA's note reader,
a trial's option shuffle keeps the gold on the same text, and the baselines score as the protocol says."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from ehrbench.agents.baselines import AbstainAgent, OracleAgent
from ehrbench.noteqa.options import for_trial, order_label
from ehrbench.noteqa.published import LETTERS, notes_block
from ehrbench.noteqa.records import DischargeNote, read_discharge_notes
from ehrbench.noteqa.suite import checked, discharge_csv
from ehrbench.scoring import protocol_of, score_trial
from ehrbench.tasks import AgentAnswer, EvalTask, Gold, TaskView

NOTES = {
    7: [DischargeNote("7-DS-1", 7, 70, 1, "2150-01-03 00:00:00",
                      "Chief Complaint:\nSepsis\n\n  Hospitalized for 4 days."),
        DischargeNote("7-DS-2", 7, 71, 2, "2151-05-09 00:00:00", "Chief Complaint:\nPneumonia")],
}
CHOICES = ("Sepsis", "Pneumonia", "Stroke", "Asthma", "Gout")


def record(**overrides) -> dict:
    base = {"question_id": "7", "patient_id": 7, "num_notes": 2, "note_ids": ["7-DS-1", "7-DS-2"],
            "span": "Chief Complaint:\nSepsis", "answer": "A", "reference_answer": "Sepsis",
            **{f"choice_{letter}": choice for letter, choice in zip(LETTERS, CHOICES, strict=True)}}
    return base | overrides


def test_a_sound_question_passes_every_check():
    [row] = checked([record()], NOTES)
    assert (row["notes_found"], row["span_in_notes"], row["options_distinct"], row["answer_is_reference"]) == (
        True, True, True, True)
    block = notes_block([note.with_header() for note in NOTES[7]])
    assert row["notes_tokens"] > 0 and "Patient ID : 7\nAdmission ID : 70\nChartdate : 2150-01-03\n" in block


@pytest.mark.parametrize(("overrides", "failed"), [
    ({"note_ids": ["7-DS-1", "7-DS-9"]}, "notes_found"),  # a note the build does not have
    ({"num_notes": 3}, "notes_found"),  # asks over more notes than it names
    ({"span": "Chief Complaint:\nStroke"}, "span_in_notes"),  # the support is not in the notes
    # the cleaned notes are what the model reads: the raw text's blank line and indentation are collapsed
    ({"span": "Sepsis\n\n  Hospitalized"}, "span_in_notes"),
    ({"choice_C": " sepsis "}, "options_distinct"),  # the same option, case and spacing aside
    ({"choice_E": None}, "options_distinct"),
    ({"answer": "B"}, "answer_is_reference"),  # the letter points at another option
])
def test_each_check_fails_on_its_own_fault(overrides, failed):
    [row] = checked([record(**overrides)], NOTES)
    assert [name for name in ("notes_found", "span_in_notes", "options_distinct", "answer_is_reference")
            if not row[name]] == [failed]


def test_the_notes_export_reads_back_through_ehrnoteqas_note_reader(tmp_path: Path):
    path = tmp_path / "discharge.csv.gz"
    path.write_bytes(discharge_csv([*NOTES[7], DischargeNote("8-DS-1", 8, 80, 1, "2140-02-02 00:00:00", 'a "q", b')]))
    assert read_discharge_notes(path, {7}) == {7: NOTES[7]}  # text with commas, quotes and newlines intact
    assert read_discharge_notes(path, {8})[8][0].text == 'a "q", b'


def note_task(qa_format: str = "multichoice", answer: str = "C", seed: int = 0) -> EvalTask:
    view = TaskView("noteqa", f"7-{qa_format}", "mimic_iv", "Which diagnosis?", notes="[note 1 start]\n…",
                    choices=CHOICES, qa_format=qa_format, option_seed=seed, protocol="ehrnoteqa")
    return EvalTask(view, Gold(answer_text=CHOICES["ABCDE".index(answer)], published_answer=answer,
                               protocol="ehrnoteqa", task_type=qa_format))


def test_trial_zero_shows_the_files_order_and_later_trials_a_seeded_shuffle():
    task = note_task()
    assert for_trial(task, 0) is task and order_label(None) is None
    shown = [for_trial(task, trial) for trial in range(1, 41)]
    for variant in shown:
        order = variant.view.option_order
        assert sorted(order) == [0, 1, 2, 3, 4]
        assert variant.view.choices == tuple(CHOICES[i] for i in order)
        # the gold letter moves with its text
        assert variant.view.choices["ABCDE".index(variant.gold.published_answer)] == "Stroke"
        assert order_label(order) == "".join("ABCDE"[i] for i in order)
    assert [v.view.option_order for v in shown] == [for_trial(task, t).view.option_order for t in range(1, 41)]
    positions = Counter(v.gold.published_answer for v in shown)
    assert set(positions) == set("ABCDE")  # over 40 trials the correct option is shown in every position
    assert [v.view.option_order for v in shown] != [for_trial(note_task(seed=1), t).view.option_order
                                                    for t in range(1, 41)]
    open_ended = note_task("openended")
    assert for_trial(open_ended, 3) is open_ended  # no options are shown


def test_the_oracle_names_the_correct_option_as_the_trial_shows_it_and_the_abstainer_fails():
    for qa_format in ("multichoice", "openended"):
        task = note_task(qa_format)
        oracle = OracleAgent({task.key: task.gold})
        for trial in range(6):
            shown = for_trial(task, trial)
            scored = score_trial(shown, oracle.run(shown.view))
            assert scored["correct"] is True and scored["reward"] == 1.0
            assert scored["answer_judge"] == ("letter" if qa_format == "multichoice" else "match")
        assert protocol_of(task) == "ehrnoteqa"
        abstained = score_trial(task, AbstainAgent().run(task.view))
        assert (abstained["correct"], abstained["answer_judge"]) == (False, "no_answer")


@pytest.mark.parametrize(("text", "correct"), [
    ("C. Stroke", True), ("The answer is C", True), ("A. Sepsis", False), ("Stroke", False),  # no letter: wrong
])
def test_without_a_judge_model_multiple_choice_reads_the_first_letter(text, correct):
    assert score_trial(note_task(), AgentAnswer(answer_text=text, free_text=True))["correct"] is correct


class ScriptedJudge:
    """A judge model that replies from a list and records the prompts it got; every reply costs 5 + 1 tokens."""

    provider, model = "openai", "gpt-4o-mini"  # a priced model: the judge's cost is computed

    def __init__(self, replies):
        self.replies, self.prompts = list(replies), []

    def chat(self, messages, tools, *, temperature=0.0, max_tokens=None):
        from ehrbench.llm.tool_chat import ChatTurn, Usage

        self.prompts.append((messages, temperature, max_tokens))
        return ChatTurn(self.replies.pop(0), [], Usage(5, 1), "stop", 0.0)


def test_a_judge_model_decides_by_majority_of_its_votes():
    from ehrbench.evaluation.judge import AnswerJudge

    judge = AnswerJudge(ScriptedJudge(["yes", "No.", "yes"]), votes=3)
    scored = score_trial(note_task(), AgentAnswer(answer_text="stroke, I think", free_text=True), judge=judge)
    assert (scored["correct"], scored["answer_judge"]) == (True, "llm")
    assert [(t, m) for _, t, m in judge.model.prompts] == [(0.0, 600)] * 3
    assert "Correct Answer:\nC. Stroke" in judge.model.prompts[0][0][0]["content"]
    # the three votes' tokens are the judge's, apart from the agent's; priced at gpt-4o-mini's list price
    assert (scored["judge_input_tokens"], scored["judge_output_tokens"]) == (15, 3)
    assert scored["judge_cost_usd"] == pytest.approx((15 * 0.15 + 3 * 0.60) / 1_000_000)
    assert "judge_input_tokens" not in score_trial(note_task(), AgentAnswer(answer_text="C"))  # no judge model
    open_ended = AnswerJudge(ScriptedJudge(["Score: 0\nReasoning: no"]))
    assert score_trial(note_task("openended"), AgentAnswer(answer_text="Stroke"), judge=open_ended)["correct"] is False
