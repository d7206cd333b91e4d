"""EHRNoteQA's published rules (Kweon et al., NeurIPS 2024 Datasets and Benchmarks; ji-youn-kim/EHRNoteQA;
docs/benchmarks.md#ehrnoteqa-accuracy): how a question's discharge summaries are cleaned and laid out, the prompt
the evaluated model gets, and the GPT-4 judge that grades its free-text output, for both formats.

- `src/preprocessing/preprocess.py`: a patient's MIMIC-IV-Note discharge summaries in charttime order, each text
  cleaned by `transform_string` and headed by its patient, admission and chart date (`clean_note_text`,
  `note_with_header`); the first three become note_1..note_3, of which the question uses `num_notes`.
- `src/generation/generate.py` and `utils.py`: the notes as `[note i start]` … `[note i end]` blocks (`notes_block`)
  in the "Discharge Summary" prompt, multiple-choice with options A-E in the file's order (`answer_prompt`).
- `src/evaluation/evaluate.py` and `utils.py`: a judge model (gpt-4-1106-preview, temperature 0, one call) reads the
  output and the correct option: "yes"/"no" for multiple-choice, "Score: 0|1" for open-ended, whose gold is the correct
  option's text (`judge_prompt`, `judge_verdict`). The repository has no code that reads the judge's reply; the
  reading here is the one its prompts ask for (docs/benchmarks.md#ehrnoteqa-accuracy).

The prompt texts are the published ones, character for character, since the judge's and the evaluated model's
behaviour depends on them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

Format = Literal["multichoice", "openended"]
FORMATS: tuple[Format, ...] = ("multichoice", "openended")
LETTERS = ("A", "B", "C", "D", "E")
MAX_NOTES = 3  # note_1..note_3
JUDGE_MODEL = "gpt-4-1106-preview"
MAX_NEW_TOKENS = 600  # the evaluated model's and the judge's, both at temperature 0

# generation/utils.py PROMPT_DICT: the "gpt" templates (any model whose name contains "gpt"); the Llama-2-chat ones
# wrap the same body in [INST] <<SYS>> ... [/INST].
_ANSWER_BODY = {
    "multichoice": ("Discharge Summary :\n{note}\n\nQuestion : {question}\nChoices :\nA. {choice_a}\nB. {choice_b}\n"
                    "C. {choice_c}\nD. {choice_d}\nE. {choice_e}\n\nAnswer :"),
    "openended": "Discharge Summary :\n{note}\n\nQuestion : {question}\n\nAnswer :",
}
_LLAMA_2_CHAT = "[INST] <<SYS>>\nYou are a helpful, respectful and honest assistant.\n<</SYS>>\n\n{body} [/INST]"
LLAMA_2_CHAT_MODELS = ("Llama-2-7b-chat-hf", "Llama-2-13b-chat-hf", "Llama-2-70b-chat-hf")

# evaluation/utils.py PROMPT_DICT
_JUDGE = {
    "openended": (
        "Your task is to evaluate the provided model output in response to a specific question associated with the "
        "given discharge summaries. By using the correct answer also provided, you must score the answer as 0 or 1, "
        "based on the following scoring instructions.\n"
        "Scoring Instructions:\n"
        "1. Assign 1 point if the answer is correct.\n"
        "2. Assign 0 points if the answer is either incorrect, or if it falsely claims there is no answer when one "
        "exists according to the discharge summaries.\n\n"
        "- Discharge Summaries:\n{note}\n\n"
        "- Question: {question}\n\n"
        "- Correct Answer: {correct_answer}\n\n"
        "- Model Output:\n\n"
        "{output}\n\n"
        "Output format:\n"
        "Score: {{score}}\n"
        "Reasoning: {{explanation}}\n"
        "(Note: In your response please replace {{score}} with the numerical score of 0 or 1, and provide a brief "
        "reasoning for the assigned score based on the evaluation criteria.)"),
    "multichoice": (
        "Your task is to evaluate the provided model output by determining whether it matches the correct answer from "
        "the multiple-choice options provided. The model output is correct and should be met with a \"yes\" if it "
        "accurately reflects the content of the correct answer choice, not necessarily its exact wording. If the "
        "content of the model output aligns with the correct answer choice, despite any additional details or varied "
        "phrasing, you are to respond \"yes\". Should the model output diverge in meaning or substance from the "
        "correct answer\u2014whether by selecting an alternative choice or providing a response not aligning with "
        "any provided options\u2014a response of \"no\" is necessary.\n\n"
        "Model Output:\n"
        "{output}\n\n"
        "Answer Choices:\n"
        "{choices}\n\n"
        "Correct Answer:\n"
        "{answer}\n\n"
        "With the given information, do you conclude that the model output substantively matches the correct answer "
        "provided? Respond solely with \"yes\" or \"no\"."),
}

_NEWLINE_RUN = re.compile(r"(\n\s*|\s*\n)")
_SPACE_RUN = re.compile(r"\s{2,}")
_SCORE = re.compile(r"Score:\s*([01])\b")


def clean_note_text(text: str) -> str:
    """transform_string: a newline with the whitespace around it becomes one newline (a newline and what follows it,
    or the whitespace before a newline: the regex's first alternative wins where both match), then any run of two or
    more whitespace characters becomes one space, then the ends are stripped. Kept as published, including that a
    newline left beside a space by the first step joins two lines in the second."""
    return _SPACE_RUN.sub(" ", _NEWLINE_RUN.sub("\n", text)).strip()


def note_with_header(subject_id: int, hadm_id: int, charttime: str, text: str) -> str:
    """A cleaned note under its header: patient, admission, and the chart date (charttime's first 10 characters)."""
    return (f"Patient ID : {subject_id}\nAdmission ID : {hadm_id}\nChartdate : {charttime[:10]}\n"
            f"{clean_note_text(text)}")


def notes_block(notes: Sequence[str]) -> str:
    """A question's notes (headed, in charttime order) as `[note i start]\\n…\\n[note i end]` blocks, one blank line
    apart."""
    return "\n\n".join(f"[note {i} start]\n{note}\n[note {i} end]" for i, note in enumerate(notes, start=1))


def answer_prompt(kind: Format, notes: str, question: str, choices: Sequence[str], *,
                  model_name: str = "gpt") -> str:
    """The evaluated model's prompt (one user message): `notes` from `notes_block`, the five `choices` in the file's
    order (multiple-choice only). Llama-2-chat models (the three the repository names) get its [INST] wrapping."""
    _check_kind(kind)
    if kind == "multichoice" and len(choices) != len(LETTERS):
        raise ValueError(f"EHRNoteQA multiple-choice questions have {len(LETTERS)} options, got {len(choices)}")
    options = dict(zip(("choice_a", "choice_b", "choice_c", "choice_d", "choice_e"), choices, strict=False))
    body = _ANSWER_BODY[kind].format(note=notes, question=question, **options)
    if model_name in LLAMA_2_CHAT_MODELS:
        return _LLAMA_2_CHAT.format(body=body)
    return body


def judge_prompt(kind: Format, *, output: str, question: str, notes: str, choices: Sequence[str],
                 answer: str) -> str:
    """The judge's prompt. Multiple-choice: the output, the options as "A. …" lines and the correct one as
    "<letter>. <text>". Open-ended: the notes block, the question, the correct option's text and the output."""
    _check_kind(kind)
    if answer not in LETTERS:
        raise ValueError(f"EHRNoteQA answers are a letter A-E, got {answer!r}")
    correct = choices[LETTERS.index(answer)]
    if kind == "multichoice":
        listed = "\n".join(f"{letter}. {choice}" for letter, choice in zip(LETTERS, choices, strict=True))
        return _JUDGE["multichoice"].format(output=output, choices=listed, answer=f"{answer}. {correct}")
    return _JUDGE["openended"].format(note=notes, question=question, correct_answer=correct, output=output)


def judge_verdict(kind: Format, reply: str) -> bool | None:
    """The judge's reply read as the prompt asks: multiple-choice "yes" (right) or "no" (wrong), open-ended
    "Score: 1" or "Score: 0". None when the reply says neither (the caller counts it wrong, or asks again)."""
    _check_kind(kind)
    text = reply.strip()
    if kind == "multichoice":
        word = re.match(r"[A-Za-z]+", text.strip("\"'*` "))
        verdict = word.group(0).lower() if word else ""
        return {"yes": True, "no": False}.get(verdict)
    found = _SCORE.search(text)
    return None if found is None else found.group(1) == "1"


def _check_kind(kind: str) -> None:
    if kind not in FORMATS:
        raise ValueError(f"unknown EHRNoteQA format {kind!r}; expected one of {', '.join(FORMATS)}")
