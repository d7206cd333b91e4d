"""Interactive tasks (suite `chatqa`, EHR-ChatQA style): a simulated user who knows a goal, an agent with tools over a
*renamed* database (profile `renamed`, docs/benchmarks.md#ehr-chatqa-renamed-schemas).

IncreQA (`incre_tasks`, module `incre`; wording in `incre_instruction`): an answerable, executed ehrsql question whose
item (diagnosis, procedure, lab test, vital, drug) has a lay term becomes a user instruction: the goal, then the
question's constraints one by one, taken from the template slots (patient, item, time expression, operators), the
item named as people say it ("Hb", "AKI", "Lasix") and never by its stored wording. Its gold SQL is the question's gold
SQL renamed for `renamed/<db>`; the answer is re-executed there and must equal the ehrsql answer (else the task is
dropped and counted).

AdaptQA (`adapt_tasks`, module `adapt`; cases and shapes in `adapt_cases`): tasks whose first request cannot be met as
asked, with the user's fallback stated up front: a brand name absent from the data → medications containing its
generic name; a lab test absent from the data → a clinically related test; a drug absent from the data → any drug of
its class. Gold SQL is written over the compatibility schema with the fallback (`... WHERE NOT EXISTS (asked)`),
renamed, and executed on the renamed database (`renamed_database`).

`chatqa_export` (module `export`) writes both in EHR-ChatQA's task files. The curated tables live in
`questions/data/*.yaml` (loaded by `lay_terms`); `demo_coverage` (module `coverage`) reports how many of their entries
match a database's stored values (`stored_values`).
"""

from ehrbench.questions.chatqa.adapt import adapt_sql, adapt_tasks
from ehrbench.questions.chatqa.adapt_cases import DRUG_SOURCES, LAB_SOURCES
from ehrbench.questions.chatqa.coverage import CoverageReport, demo_coverage
from ehrbench.questions.chatqa.export import CHATQA_DB_IDS, chatqa_export
from ehrbench.questions.chatqa.incre import incre_tasks
from ehrbench.questions.chatqa.incre_instruction import (
    KIND_NOUNS,
    OPERATOR_NOUNS,
    SLOT_NOUNS,
    TOPICS,
    incre_instruction,
)
from ehrbench.questions.chatqa.lay_terms import (
    DATA_DIR,
    LAY_KINDS,
    AlternativeLab,
    BrandGeneric,
    DrugClass,
    LayTerm,
    LayTerms,
    load_lay_terms,
)
from ehrbench.questions.chatqa.stored_values import DICTIONARY_VALUES, ITEM_KINDS, USED_VALUES, item_kind
from ehrbench.questions.chatqa.suite import RENAMED_PROFILE, SUITE, TIMEOUT_S

__all__ = [
    "CHATQA_DB_IDS",
    "DATA_DIR",
    "DICTIONARY_VALUES",
    "DRUG_SOURCES",
    "ITEM_KINDS",
    "KIND_NOUNS",
    "LAB_SOURCES",
    "LAY_KINDS",
    "OPERATOR_NOUNS",
    "RENAMED_PROFILE",
    "SLOT_NOUNS",
    "SUITE",
    "TIMEOUT_S",
    "TOPICS",
    "USED_VALUES",
    "AlternativeLab",
    "BrandGeneric",
    "CoverageReport",
    "DrugClass",
    "LayTerm",
    "LayTerms",
    "adapt_sql",
    "adapt_tasks",
    "chatqa_export",
    "demo_coverage",
    "incre_instruction",
    "incre_tasks",
    "item_kind",
    "load_lay_terms",
]
