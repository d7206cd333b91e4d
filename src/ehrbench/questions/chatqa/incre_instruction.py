"""IncreQA wording: the user instruction of a task (goal, constraints step by step, items named as people say them)
built from the question's template slots."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from ehrbench.questions.generate import GeneratedQuestion
from ehrbench.questions.instantiate import fill_texts
from ehrbench.questions.templates import Template, slot_order, time_family

KIND_NOUNS = {"diagnoses": ("diagnosis", "diagnoses"), "procedures": ("procedure", "procedures"),
              "labs": ("lab test", "lab tests"), "drugs": ("medication", "medications"),
              "vitals": ("vital sign", "vital signs")}
TOPICS = {"demographics": "demographics", "admissions": "hospital admissions", "icu_stays": "ICU stays",
          "diagnoses": "diagnoses", "procedures": "procedures", "prescriptions": "medication prescriptions",
          "labs": "lab tests", "vitals": "vital signs", "intake_output": "fluid intake and output",
          "microbiology": "microbiology tests", "cost": "hospital costs", "survival": "patient survival",
          "population": "patient statistics"}
SLOT_NOUNS = {"drug_route": "route of administration", "careunit": "care unit", "spec_name": "specimen",
              "lab_value": "lab value", "vital_value": "threshold value", "admission_route": "admission route",
              "input_name": "intake item", "output_name": "output item"}
OPERATOR_NOUNS = {"agg": "aggregate", "comparison": "comparison", "n_times": "number of times",
                  "n_rank": "top-N cutoff", "age_group": "age group", "survival_period": "survival period",
                  "unit_count": "time unit", "sort": "ordering", "unit_average": "averaging period"}
_OPENINGS = ("Your goal is to find information related to {topic}.", "You want to learn about {topic}.",
             "You are looking for information about {topic}.")
_LOOKUP_SENTENCES = (
    'When querying the DB agent, since you do not know how {name} is stored, use common terms like {terms} when '
    'referring to it, and let the DB agent find it for you.',
    'You do not know how {name} is stored in the database: when talking to the DB agent, use common terms like '
    '{terms} for it and let the DB agent find it.')


@dataclass(frozen=True)
class _SpokenItem:
    slot: str
    kind: str
    stored: str
    name: str  # what the user says
    terms: tuple[str, ...]  # common terms the user offers
    similar: tuple[str, ...]  # near-duplicate stored values the user does not mean


def incre_instruction(question: GeneratedQuestion, template: Template, items: list[_SpokenItem],
                      rng: np.random.Generator) -> tuple[str, str]:
    """The user instruction, and the question itself with the items' lay names."""
    texts = json.loads(question.slot_texts)
    spoken = {item.slot: item for item in items}
    said = {slot: spoken[slot].name if slot in spoken else text for slot, text in texts.items()}
    lay_question = fill_texts(template.question, said)
    topic = TOPICS.get(question.category, question.category.replace("_", " "))
    topic = f"a specific patient's {topic}" if question.patient_scoped else topic
    # the patient first, then the items and other values, then operators and time expressions
    order = sorted(slot_order(template.question), key=lambda slot: (
        slot != "patient_id", slot not in spoken, slot in template.operators or slot in template.time))
    steps = [_step(slot, said[slot], template, spoken.get(slot)) for slot in order if said.get(slot)]
    sentences = [_OPENINGS[int(rng.integers(len(_OPENINGS)))].format(topic=topic),
                 f"Specifically, you want to know: {lay_question}",
                 "Step by step, you tell the DB agent: "
                 + "; ".join(f"({n}) {step}" for n, step in enumerate(steps, 1)) + "."]
    lookup = _LOOKUP_SENTENCES[int(rng.integers(len(_LOOKUP_SENTENCES)))]
    for item in items:
        singular, plural = KIND_NOUNS[item.kind]
        if item.similar:
            sentences.append(f"You want to search for {item.name} specifically, not other similar {plural} like "
                             f"{_or_list(item.similar)}.")
        sentences.append(lookup.format(name=item.name, terms=_or_list(item.terms)))
    return " ".join(sentences), lay_question


def _step(slot: str, text: str, template: Template, item: _SpokenItem | None) -> str:
    if item is not None:
        return f"the {KIND_NOUNS[item.kind][0]} is {text}"
    if slot == "patient_id":
        return f"the patient is patient ID {text}"
    if slot in template.operators:
        return f"the {OPERATOR_NOUNS.get(slot, slot.replace('_', ' '))} is {text}"
    if slot in template.time:
        family = time_family(slot)
        if family == "exact":
            return f"you want the {text} one"
        if family == "within":
            return f"the events happen {text}"
        return f"the time frame is {text}"
    base = slot.rstrip("0123456789")
    return f"the {SLOT_NOUNS.get(base, base.replace('_', ' '))} is {text}"


def _or_list(names: Iterable[str]) -> str:
    quoted = [f'"{n}"' for n in names]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]
