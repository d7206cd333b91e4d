"""Conformance of ehrbench.noteqa with EHRNoteQA's published code (ji-youn-kim/EHRNoteQA: `src/preprocessing/
preprocess.py` transform_string and the note header, `src/generation/utils.py` and `generate.py` for the evaluated
model's prompt, `src/evaluation/utils.py` and `evaluate.py` for the judge). Every expected value is worked out by hand
from the published rule named in its case."""

from __future__ import annotations

import gzip
import json

import pytest

from ehrbench.errors import ConfigError
from ehrbench.noteqa.published import (
    answer_prompt,
    clean_note_text,
    judge_prompt,
    judge_verdict,
    note_with_header,
    notes_block,
)
from ehrbench.noteqa.records import question_notes, read_discharge_notes, read_questions

CLEANING = [
    # (rule pinned, raw text, cleaned)
    ("a newline and the blank lines and indentation after it become one newline", "a\n\n  x", "a\nx"),
    ("spaces before a newline are taken by the second alternative: the next line's indent is left, then joined",
     "a  \n\n  x", "a x"),
    ("one space on each side of a newline: joined into one line", "a \n x", "a x"),
    ("two tabs are a run of whitespace: one space", "a\t\tb", "a b"),
    ("a single tab stays", "a\tb", "a\tb"),
    ("a single space stays", "a b", "a b"),
    ("three spaces become one", "a   b", "a b"),
    ("the ends are stripped", "  a\n", "a"),
    ("CRLF: the carriage return goes with the newline", "line1\r\nline2", "line1\nline2"),
    ("a line break alone is kept", "Name: ___\nUnit No: ___", "Name: ___\nUnit No: ___"),
    ("blank lines between sections collapse", "History:\n\n\nCourse:", "History:\nCourse:"),
    ("the de-identification blanks are not touched", "Sex:   F ___", "Sex: F ___"),
]


@pytest.mark.parametrize(("rule", "raw", "cleaned"), CLEANING)
def test_transform_string(rule, raw, cleaned):
    assert clean_note_text(raw) == cleaned, rule


def test_the_note_header_gives_patient_admission_and_chart_date():
    assert note_with_header(10001, 20002, "2180-05-06 22:23:00", " Name:  ___\n\n Sex: F ") == (
        "Patient ID : 10001\nAdmission ID : 20002\nChartdate : 2180-05-06\nName: ___\nSex: F")


def test_notes_are_numbered_blocks_one_blank_line_apart():
    assert notes_block(["first", "second"]) == ("[note 1 start]\nfirst\n[note 1 end]\n\n"
                                                "[note 2 start]\nsecond\n[note 2 end]")
    assert notes_block(["only"]) == "[note 1 start]\nonly\n[note 1 end]"


CHOICES = ("Aspirin", "Heparin", "Warfarin", "Insulin", "None of these")


def test_the_multiple_choice_prompt_lists_the_options_in_file_order():
    assert answer_prompt("multichoice", "N", "Which drug?", CHOICES) == (
        "Discharge Summary :\nN\n\nQuestion : Which drug?\nChoices :\nA. Aspirin\nB. Heparin\nC. Warfarin\n"
        "D. Insulin\nE. None of these\n\nAnswer :")


def test_the_open_ended_prompt_has_no_choices():
    assert answer_prompt("openended", "N", "Which drug?", CHOICES) == (
        "Discharge Summary :\nN\n\nQuestion : Which drug?\n\nAnswer :")


def test_llama_2_chat_models_get_the_inst_wrapping_with_a_space_before_the_closing_tag():
    assert answer_prompt("openended", "N", "Q?", CHOICES, model_name="Llama-2-13b-chat-hf") == (
        "[INST] <<SYS>>\nYou are a helpful, respectful and honest assistant.\n<</SYS>>\n\n"
        "Discharge Summary :\nN\n\nQuestion : Q?\n\nAnswer : [/INST]")
    # any other model, GPT or not, gets the plain template
    assert answer_prompt("openended", "N", "Q?", CHOICES, model_name="my-model").startswith("Discharge Summary :")


def test_the_multiple_choice_judge_sees_output_options_and_the_lettered_answer():
    prompt = judge_prompt("multichoice", output="It was heparin.", question="Which drug?", notes="N",
                          choices=CHOICES, answer="B")
    assert prompt.startswith("Your task is to evaluate the provided model output by determining whether it matches "
                             "the correct answer from the multiple-choice options provided. ")
    assert ("\n\nModel Output:\nIt was heparin.\n\nAnswer Choices:\nA. Aspirin\nB. Heparin\nC. Warfarin\nD. Insulin\n"
            "E. None of these\n\nCorrect Answer:\nB. Heparin\n\n") in prompt
    assert prompt.endswith('Respond solely with "yes" or "no".')
    assert "answer\u2014whether by selecting" in prompt  # the published em dashes
    assert "Which drug?" not in prompt and "N\n" not in prompt.split("Model Output")[0]  # no question, no notes


def test_the_open_ended_judge_sees_notes_question_and_the_correct_options_text():
    prompt = judge_prompt("openended", output="Heparin drip.", question="Which drug?", notes="[note 1 start]\nN\n"
                          "[note 1 end]", choices=CHOICES, answer="B")
    assert ("- Discharge Summaries:\n[note 1 start]\nN\n[note 1 end]\n\n- Question: Which drug?\n\n"
            "- Correct Answer: Heparin\n\n- Model Output:\n\nHeparin drip.\n\nOutput format:\nScore: {score}\n"
            "Reasoning: {explanation}\n") in prompt
    assert "B. Heparin" not in prompt  # the text, not the letter
    assert prompt.endswith("(Note: In your response please replace {score} with the numerical score of 0 or 1, and "
                           "provide a brief reasoning for the assigned score based on the evaluation criteria.)")


@pytest.mark.parametrize(("kind", "reply", "verdict"), [
    ("multichoice", "yes", True),
    ("multichoice", "Yes", True),
    ("multichoice", "yes.", True),
    ("multichoice", '"no"', False),
    ("multichoice", "No", False),
    ("multichoice", "The output matches.", None),  # neither word: unread
    ("multichoice", "", None),
    ("openended", "Score: 1\nReasoning: names heparin.", True),
    ("openended", "Score: 0\nReasoning: says aspirin.", False),
    ("openended", "Score:1", True),
    ("openended", "Reasoning only", None),
    ("openended", "Score: 10", None),  # not 0 or 1
])
def test_judge_replies(kind, reply, verdict):
    assert judge_verdict(kind, reply) is verdict


def test_unknown_format_and_bad_answer_letters_are_refused():
    with pytest.raises(ValueError, match="unknown EHRNoteQA format"):
        answer_prompt("open_ended", "N", "Q", CHOICES)  # the CLI help's spelling; the code compares 'openended'
    with pytest.raises(ValueError, match="a letter A-E"):
        judge_prompt("multichoice", output="x", question="q", notes="n", choices=CHOICES, answer="F")


# --- the question file and its notes ---------------------------------------------------------------------------------

def question(patient_id: int, **changes) -> dict:
    item = {"patient_id": patient_id, "category": "Level1", "num_notes": 2, "clinician": "a", "question": "Which drug?",
            **{f"choice_{letter}": choice for letter, choice in zip("ABCDE", CHOICES, strict=True)}, "answer": "B"}
    return item | changes


def write_discharge(path, rows) -> None:
    header = "note_id,subject_id,hadm_id,note_type,note_seq,charttime,storetime,text\n"
    with gzip.open(path, "wt") as handle:
        handle.write(header + "".join(
            f'{note_id},{subject},{hadm},DS,{seq},{charttime},,"{text}"\n'
            for note_id, subject, hadm, seq, charttime, text in rows))


def test_a_question_is_asked_over_its_patients_first_notes_in_charttime_order(tmp_path):
    questions_file = tmp_path / "EHRNoteQA.jsonl"
    questions_file.write_text("\n".join(json.dumps(q) for q in (question(1), question(2, num_notes=1))) + "\n")
    discharge = tmp_path / "discharge.csv.gz"
    write_discharge(discharge, [
        ("1-DS-3", 1, 13, 3, "2150-03-01 10:00:00", "third"),
        ("1-DS-1", 1, 11, 1, "2150-01-01 10:00:00", "first  one"),
        ("1-DS-2", 1, 12, 2, "2150-02-01 10:00:00", "second"),
        ("2-DS-9", 2, 29, 9, "2160-01-01 10:00:00", "b"),
        ("3-DS-1", 3, 31, 1, "2170-01-01 10:00:00", "not asked about"),
    ])
    questions = read_questions(questions_file)
    notes = read_discharge_notes(discharge, {q.patient_id for q in questions})
    assert set(notes) == {1, 2}
    assert question_notes(questions[0], notes, source=discharge) == [
        "Patient ID : 1\nAdmission ID : 11\nChartdate : 2150-01-01\nfirst one",
        "Patient ID : 1\nAdmission ID : 12\nChartdate : 2150-02-01\nsecond"]
    assert len(question_notes(questions[1], notes, source=discharge)) == 1
    assert questions[0].choices == CHOICES


def test_equal_chart_times_are_ordered_by_note_seq(tmp_path):
    discharge = tmp_path / "discharge.csv.gz"
    write_discharge(discharge, [("1-DS-2", 1, 12, 2, "2150-01-01 10:00:00", "b"),
                                ("1-DS-1", 1, 11, 1, "2150-01-01 10:00:00", "a")])
    assert [n.note_id for n in read_discharge_notes(discharge, {1})[1]] == ["1-DS-1", "1-DS-2"]


@pytest.mark.parametrize(("lines", "message"), [
    (['{"patient_id": 1'], r"line 1: not valid JSON"),
    ([json.dumps(question(1, answer="F"))], r"line 1 \(patient 1\): field answer"),
    ([json.dumps(question(1, num_notes=4))], r"field num_notes"),
    ([json.dumps({k: v for k, v in question(1).items() if k != "choice_C"})], r"field choice_C"),
    ([json.dumps(question(1)), json.dumps(question(1))], r"line 2: patient 1 is asked again \(first on line 1\)"),
    (["[1, 2]"], r"line 1: a JSON list; expected a question object"),
])
def test_bad_question_files_name_the_file_line_and_field(tmp_path, lines, message):
    path = tmp_path / "EHRNoteQA.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ConfigError, match=message):
        read_questions(path)


def test_missing_notes_name_the_patient_and_the_notes_found(tmp_path):
    discharge = tmp_path / "discharge.csv.gz"
    write_discharge(discharge, [("7-DS-1", 7, 71, 1, "2150-01-01 10:00:00", "a")])
    questions_file = tmp_path / "EHRNoteQA.jsonl"
    questions_file.write_text(json.dumps(question(7, num_notes=3)) + "\n")
    [asked] = read_questions(questions_file)
    with pytest.raises(ConfigError, match=r"patient 7 has 1 discharge summary \(7-DS-1\); the EHRNoteQA question asks "
                                          r"over 3"):
        question_notes(asked, read_discharge_notes(discharge, {7}), source=discharge)


def test_a_discharge_file_without_the_note_columns_is_refused(tmp_path):
    path = tmp_path / "discharge.csv.gz"
    with gzip.open(path, "wt") as handle:
        handle.write("subject_id,text\n1,a\n")
    with pytest.raises(ConfigError, match=r"no column\(s\) note_id, hadm_id, note_seq, charttime"):
        read_discharge_notes(path, {1})


# --- the judge's verdict (protocol ehrnoteqa) ------------------------------------------------------------------------

class ScriptedJudge:
    """A judge model that replies from a script and records its requests."""

    provider, model = "scripted", "judge"

    def __init__(self, *replies: str):
        self.replies, self.requests = list(replies), []

    def chat(self, messages, tools, *, temperature=0.0, max_tokens=None):
        from ehrbench.llm.tool_chat import ChatTurn, Usage

        self.requests.append((messages, tools, temperature, max_tokens))
        return ChatTurn(self.replies.pop(0), [], Usage(10, 1), "stop", 0.0)


def verdict(kind, answer_text, judge=None, **options):
    from ehrbench.scoring.ehrnoteqa import published_correct

    return published_correct(kind, answer_text=answer_text, question="Which drug?", notes="[note 1 start]\nN\n"
                             "[note 1 end]", choices=CHOICES, answer="B", model=judge, **options)


def test_the_judge_gets_the_published_prompt_once_at_temperature_0_and_600_tokens():
    judge = ScriptedJudge("yes")
    found = verdict("multichoice", "Heparin.", judge)
    assert (found.correct, found.method, found.replies) == (True, "llm", ("yes",))
    [(messages, tools, temperature, max_tokens)] = judge.requests
    assert messages == [{"role": "user", "content": judge_prompt(
        "multichoice", output="Heparin.", question="Which drug?", notes="", choices=CHOICES, answer="B")}]
    assert (tools, temperature, max_tokens) == ([], 0.0, 600)


@pytest.mark.parametrize(("kind", "replies", "votes", "correct"), [
    ("multichoice", ["no"], 1, False),
    ("multichoice", ["It matches."], 1, False),  # unread: wrong
    ("openended", ["Score: 1\nReasoning: heparin."], 1, True),
    ("openended", ["Score: 0\nReasoning: aspirin."], 1, False),
    ("multichoice", ["yes", "no", "yes"], 3, True),  # majority
    ("multichoice", ["yes", "no", "maybe"], 3, False),  # one of three
    ("multichoice", ["yes", "no"], 2, False),  # a tie is not a majority
])
def test_judge_verdicts_and_votes(kind, replies, votes, correct):
    judge = ScriptedJudge(*replies)
    found = verdict(kind, "Heparin drip.", judge, votes=votes)
    assert found.correct is correct and len(judge.requests) == votes and found.usage.input_tokens == 10 * votes


def test_errors_and_empty_answers_are_wrong_without_asking_the_judge():
    judge = ScriptedJudge()
    assert verdict("openended", "x", judge, error="timeout").method == "error"
    assert verdict("openended", "  ", judge).method == "no_answer"
    assert verdict("multichoice", None, judge).correct is False and judge.requests == []


@pytest.mark.parametrize(("kind", "answer_text", "correct"), [
    ("multichoice", "B", True),
    ("multichoice", "The answer is B. Heparin", True),
    ("multichoice", "C", False),
    ("multichoice", "Heparin", False),  # no letter: the stand-in cannot read it
    ("openended", "She was started on a heparin drip.", True),
    ("openended", "Warfarin", False),
])
def test_without_a_judge_model_the_stand_ins_are_recorded(kind, answer_text, correct):
    found = verdict(kind, answer_text)
    assert found.correct is correct and found.method == ("letter" if kind == "multichoice" else "match")
