"""LLM-written note questions (docs/benchmarks.md#llm-written-note-questions): the living counterpart of EHRNoteQA,
whose questions GPT-4 wrote from a patient's discharge summaries and clinicians then reviewed. EHRNoteQA's
repository does not hold its generation prompt, so the prompt here is ehrbench's own, written to the paper's rules: the
question needs the notes, five options with one correct, the answer supported by the notes.

Per patient, over their first three notes (headed and cleaned as the evaluated model will read them), the model
(any `ChatModel`; cached like paraphrases, so a rebuild asks nothing again) gets one topic drawn from
`keyed_rng(seed, "noteqa-llm", <patient>)` and writes one JSON object: question, options A-E, the correct letter,
the evidence (a quote of the notes) and an open-ended answer. A reply is kept only if every filter passes, each
rejection counted by reason:

- `unreadable`: no JSON object with those fields, or the letter is not A-E, or not five options;
- `evidence_not_in_notes`: the quote is not in the notes (case and whitespace aside);
- `options_not_distinct`: two options are the same (case and whitespace aside);
- `guessable`: asked without the notes (EHRNoteQA's multiple-choice prompt with no notes block, temperature 0), the
  model picks the correct letter — only when a `blind` model is given;
- `duplicate`: the question is a near-copy (rapidfuzz ratio ≥ 90 after normalising) of one kept before with the
  same correct answer (the same wording over another patient's notes with another answer is another item).

Kept questions have the record layout of the template ones (ehrbench.noteqa.generation), `generator` `llm:<model>`,
`template` the topic, `span` the evidence as it stands in the notes, `reference_answer` the correct option's text (the
open-ended gold, as in EHRNoteQA) and the model's own open-ended answer in `model_answer`.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from rapidfuzz import fuzz

from ehrbench.llm.chat import ChatModel
from ehrbench.noteqa.generation import level
from ehrbench.noteqa.published import LETTERS, MAX_NOTES, notes_block
from ehrbench.noteqa.records import DischargeNote
from ehrbench.noteqa.text import first_letter, options_distinct, plain
from ehrbench.seeding import keyed_rng

# ehrbench's reading of "eight diverse topics" (the paper's list is not in the repository)
TOPICS = ("diagnosis or problem", "treatment or procedure", "medication", "test results", "sign or symptom",
          "etiology", "history", "discharge plan or instructions")
DUPLICATE_RATIO = 90.0
GENERATION_TEMPERATURE = 0.7

SYSTEM_PROMPT = """\
You are a clinician writing a question that tests whether a reader understood one patient's discharge summaries. \
Write exactly one multiple-choice question with five options (A-E), exactly one of them correct.

Rules:
- The question must need these notes: it cannot be answered from general medical knowledge.
- The correct option must be stated in the notes; copy the sentence or phrase that supports it, verbatim, as the \
evidence.
- The four wrong options must be plausible for this patient, but contradicted by or absent from the notes.
- Options are short (a few words) and all different.
- Also write a one-sentence answer to the question as an open question.

Reply with one JSON object and nothing else:
{"question": "...", "choices": {"A": "...", "B": "...", "C": "...", "D": "...", "E": "..."}, "answer": "<letter>", \
"evidence": "<verbatim quote of the notes>", "open_answer": "..."}"""

USER_PROMPT = "Topic of the question: {topic}.\n\n{notes}"

BLIND_PROMPT = "Question : {question}\nChoices :\nA. {A}\nB. {B}\nC. {C}\nD. {D}\nE. {E}\n\nAnswer :"


@dataclass
class GenerationReport:
    asked: int = 0
    kept: int = 0
    rejected: Counter = field(default_factory=Counter)

    def to_dict(self) -> dict:
        return {"asked": self.asked, "kept": self.kept, "rejected": dict(sorted(self.rejected.items()))}


def llm_questions(notes: Mapping[int, Sequence[DischargeNote]], model: ChatModel, *, seed: int,
                  blind: ChatModel | None = None) -> tuple[list[dict], GenerationReport]:
    """One question per patient whose reply passes every filter (see the module doc), in patient order."""
    report, kept = GenerationReport(), []
    for subject_id in sorted(notes):
        asked = list(notes[subject_id])[:MAX_NOTES]
        if not asked:
            continue
        rng = keyed_rng(seed, "noteqa-llm", str(subject_id))
        topic = TOPICS[int(rng.integers(len(TOPICS)))]
        block = notes_block([note.with_header() for note in asked])
        report.asked += 1
        [reply] = model.complete([{"role": "system", "content": SYSTEM_PROMPT},
                                  {"role": "user", "content": USER_PROMPT.format(topic=topic, notes=block)}],
                                 temperature=GENERATION_TEMPERATURE)
        item, reason = _read_reply(reply, block)
        if item is None:
            report.rejected[reason] += 1
            continue
        if blind is not None and _guessed(blind, item):
            report.rejected["guessable"] += 1
            continue
        if any(fuzz.ratio(plain(item["question"]), plain(k["question"])) >= DUPLICATE_RATIO
               and plain(item["choices"][item["answer"]]) == plain(k["reference_answer"]) for k in kept):
            report.rejected["duplicate"] += 1
            continue
        choices = item["choices"]
        kept.append({
            "patient_id": subject_id, "num_notes": len(asked), "clinician": None, "question": item["question"],
            "category": level(block),
            **{f"choice_{letter}": choices[letter] for letter in LETTERS}, "answer": item["answer"],
            "template": topic, "hadm_id": None, "note_ids": [note.note_id for note in asked],
            "span": item["span"], "reference_answer": choices[item["answer"]], "model_answer": item["open_answer"],
            "seed": seed, "generator": f"llm:{model.provider}:{model.model}"})
    report.kept = len(kept)
    return kept, report


def _read_reply(reply: str, block: str) -> tuple[dict | None, str]:
    found = re.search(r"\{.*\}", reply or "", re.S)
    try:
        item = json.loads(found.group(0)) if found else None
    except json.JSONDecodeError:
        item = None
    if not isinstance(item, dict) or not all(isinstance(item.get(k), str) and item[k].strip()
                                             for k in ("question", "answer", "evidence")):
        return None, "unreadable"
    choices = item.get("choices")
    if (not isinstance(choices, dict) or sorted(choices) != list(LETTERS) or item["answer"].strip() not in LETTERS
            or not all(isinstance(c, str) and c.strip() for c in choices.values())):
        return None, "unreadable"
    span = _locate(item["evidence"], block)
    if span is None:
        return None, "evidence_not_in_notes"
    if not options_distinct(choices[letter] for letter in LETTERS):
        return None, "options_not_distinct"
    return {"question": item["question"].strip(), "choices": {k: v.strip() for k, v in choices.items()},
            "answer": item["answer"].strip(), "span": span,
            "open_answer": str(item.get("open_answer") or "").strip()}, ""


def _locate(evidence: str, block: str) -> str | None:
    """The evidence as it stands in the notes block (case and runs of whitespace aside), or None."""
    words = evidence.split()
    if not words:
        return None
    found = re.search(r"\s+".join(re.escape(word) for word in words), block, re.I)
    return found.group(0) if found else None


def _guessed(blind: ChatModel, item: dict) -> bool:
    """The blind model, without the notes, picks the correct letter (its first standalone letter A-E)."""
    [reply] = blind.complete([{"role": "user", "content": BLIND_PROMPT.format(question=item["question"],
                                                                              **item["choices"])}], temperature=0.0)
    return first_letter(reply) == item["answer"]
