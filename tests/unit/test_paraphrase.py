"""Paraphrasing: the slot check, the seeded offline choice, reply parsing, the diversity filter, the response cache
and the configuration (no network: the chat models here are in-process fakes)."""

from __future__ import annotations

import json

import pydantic
import pytest

from ehrbench.llm import CachedChat, ModelSpec, OpenAIChat, ResponseCache, chat_model
from ehrbench.questions.generate import GeneratedQuestion
from ehrbench.questions.instantiate import fill
from ehrbench.questions.paraphrase import (
    LlmParaphraser,
    OfflineParaphraser,
    ParaphraseSettings,
    keeps_slots,
    missing_slots,
    paraphrase_questions,
    paraphraser_from_settings,
    parse_candidates,
    similarities,
)
from ehrbench.questions.templates import Template

TEMPLATE = Template(
    id="lab_value_agg", category="labs",
    question="What was the {agg} {lab_name} value of patient {patient_id} {time}?",
    phrasings=["Tell me the {agg} {lab_name} value of patient {patient_id} {time}.",
               "Give the {agg} value of the {lab_name} test for patient {patient_id} {time}.",
               "Which {agg} {lab_name} level did patient {patient_id} have {time}?",
               "What {agg} {lab_name} result was measured in patient {patient_id} {time}?"],
    operators=["agg"], time={"time": ["absolute"]},
    values={"mimic_iv": "select 1 as patient_id, 'x' as lab_name"}, sql={"mimic_iv": "select 1"})
TEMPLATES = {TEMPLATE.id: TEMPLATE}


def question_for(patient_id: str = "10009628", lab_name: str = "potassium chloride", agg: str = "average",
                 time: str = "since 12/2100", answerable: bool = True) -> GeneratedQuestion:
    """A generated question of TEMPLATE as generate.py writes it (slot_texts leaves out an empty time slot)."""
    texts = {"patient_id": patient_id, "lab_name": lab_name, "agg": agg, "time": time}
    wording = fill(TEMPLATE.question, texts, {}, {})
    return GeneratedQuestion(
        question_id=f"q-{patient_id}-{lab_name}-{agg}-{time}", suite="ehrsql", db="mimic_iv",
        template_id=TEMPLATE.id,
        category="labs", is_answerable=answerable, patient_scoped=True, question=wording, template_question=wording,
        slot_values=json.dumps({"patient_id": patient_id, "lab_name": lab_name}),
        slot_texts=json.dumps({k: v for k, v in texts.items() if v}),
        time_kinds=json.dumps({"time": "abs-month-since"}),
        current_time="2100-12-31 23:59:00", gold_sql_duckdb="select 1" if answerable else None,
        gold_sql_sqlite=None, answer=None,
        answer_text=None, answer_rows=None, empty_answer=False, empty_by_design=False, max_rows=100,
        execution_s=None, execution_error=None, sqlite_answer_text=None, sqlite_error=None)


class ScriptedChat:
    """A ChatModel that returns scripted replies in turn and records every request."""

    provider = "openai"

    def __init__(self, *replies: str, model: str = "scripted"):
        self.model = model
        self.replies = list(replies)
        self.requests: list[list[dict]] = []

    def complete(self, messages, *, temperature, n=1):
        self.requests.append(messages)
        return [self.replies.pop(0)]


class FixedEmbeddings:
    provider, model = "openai", "fixed"

    def __init__(self, vectors: dict[str, list[float]]):
        self.vectors = vectors
        self.calls: list[list[str]] = []

    def embed(self, texts):
        self.calls.append(list(texts))
        return [self.vectors[text] for text in texts]


# --- slot check ---------------------------------------------------------------------------------------------------

def test_slot_texts_match_whatever_the_case_and_spacing():
    slots = {"lab_name": "potassium chloride", "time": "since 12/2100"}
    assert keeps_slots("How much Potassium   Chloride did they get SINCE 12/2100?", slots)
    assert keeps_slots("potassium\nchloride since 12/2100", slots)
    assert missing_slots("potassium since 12/2100", slots) == ["lab_name"]


def test_numbers_match_as_whole_tokens_only():
    assert missing_slots("labs of patient 10009628", {"patient_id": "1000"}) == ["patient_id"]
    assert missing_slots("labs of patient 1000962", {"patient_id": "10009628"}) == ["patient_id"]
    assert keeps_slots("labs of patient 10009628.", {"patient_id": "10009628"})
    assert keeps_slots("(patient 10009628)", {"patient_id": "10009628"})
    for changed in ("a dose of 11.5 mg", "a dose of 1.55 mg", "a dose of 1,5 mg"):
        assert not keeps_slots(changed, {"dose": "1.5"}), changed
    assert keeps_slots("a dose of 1.5, twice", {"dose": "1.5"})


def test_a_changed_or_lost_slot_is_named():
    slots = {"agg": "average", "patient_id": "10009628", "time": "since 12/2100"}
    assert missing_slots("What was the maximum value of patient 10009629 since 12/2100?", slots) == [
        "agg", "patient_id"]
    assert missing_slots("What was the averaged value of patient 10009628 since 11/2100?", slots) == ["agg", "time"]


def test_typographic_quotes_count_as_plain_ones():
    assert keeps_slots("Was patient 7 diagnosed with alzheimer\u2019s disease?", {"d": "Alzheimer's disease"})


# --- offline paraphraser ------------------------------------------------------------------------------------------

def _questions(count: int) -> list[GeneratedQuestion]:
    return [question_for(patient_id=str(10000000 + 37 * i)) for i in range(count)]


def test_offline_choice_is_seeded_by_build_seed_and_question_id_not_by_order():
    questions = _questions(40)
    forward = {q.question_id: OfflineParaphraser(TEMPLATES, seed=3).paraphrase(q) for q in questions}
    paraphraser = OfflineParaphraser(TEMPLATES, seed=3)
    backward = {q.question_id: paraphraser.paraphrase(q) for q in reversed(questions)}
    assert forward == backward
    other_seed = {q.question_id: OfflineParaphraser(TEMPLATES, seed=4).paraphrase(q).source for q in questions}
    assert other_seed != {q_id: p.source for q_id, p in forward.items()}
    assert {p.source for p in forward.values()} == {f"offline:{i}" for i in range(5)}  # every wording is drawn


def test_offline_paraphrase_is_the_drawn_wording_filled_in():
    wordings = [TEMPLATE.question, *TEMPLATE.phrasings]
    for question in _questions(20):
        result = OfflineParaphraser(TEMPLATES).paraphrase(question)
        index = int(result.source.split(":")[1])
        expected = wordings[index].format(agg="average", lab_name="potassium chloride",
                                          patient_id=question.question_id.split("-")[1], time="since 12/2100")
        assert result.text == expected
        assert keeps_slots(result.text, json.loads(question.slot_texts))


def test_offline_paraphrase_closes_the_gap_of_an_empty_time_slot():
    question = question_for(time="")
    texts = {OfflineParaphraser(TEMPLATES, seed=s).paraphrase(question).text for s in range(20)}
    assert "What was the average potassium chloride value of patient 10009628?" in texts
    assert all("  " not in text and " ?" not in text and " ." not in text for text in texts)


def test_offline_paraphraser_names_an_unknown_template():
    with pytest.raises(ValueError, match="no template 'lab_value_agg'"):
        OfflineParaphraser({}).paraphrase(question_for())


# --- reply parsing ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("reply", [
    '["First one?", "Second one?"]',
    '```json\n["First one?", "Second one?"]\n```',
    '{"paraphrases": ["First one?", "Second one?"]}',
    "Here are 2 paraphrases:\n1. First one?\n2) Second one?\n",
    '- "First one?"\n- \u201cSecond one?\u201d\n- First one?',
])
def test_candidates_are_parsed_from_json_or_lines(reply):
    assert parse_candidates(reply) == ["First one?", "Second one?"]


def test_an_empty_reply_has_no_candidates():
    assert parse_candidates("") == []
    assert parse_candidates("[]") == []


# --- diversity filter and the LLM paraphraser ---------------------------------------------------------------------

NEAR_COPY = "What was the average potassium chloride value for patient 10009628 since 12/2100?"
DIFFERENT = "Since 12/2100, what average potassium chloride level has patient 10009628 shown?"
MOST_DIFFERENT = "Across results since 12/2100, tell me patient 10009628's average potassium chloride reading."
LOST_SLOT = "What was the mean potassium chloride value of patient 10009628 since 12/2100?"


def test_near_copies_score_above_the_threshold_and_rewordings_below():
    reference = question_for().template_question
    near, different, most = similarities(reference, [NEAR_COPY, DIFFERENT, MOST_DIFFERENT])
    assert near > 90
    assert most < different < 90


def test_llm_paraphraser_keeps_the_most_diverse_candidate_that_keeps_every_slot():
    chat = ScriptedChat(json.dumps([NEAR_COPY, LOST_SLOT, DIFFERENT, MOST_DIFFERENT]))
    result = LlmParaphraser(chat, None, OfflineParaphraser(TEMPLATES)).paraphrase(question_for())
    assert result.text == MOST_DIFFERENT
    assert result.source == "llm:scripted"
    assert (result.rejected_lost_slots, result.rejected_too_similar, result.fallback_reason) == (1, 1, None)


def test_embeddings_join_the_similarity_when_configured():
    reference = question_for().template_question
    # lexically MOST_DIFFERENT wins; these embeddings make it a near-duplicate in meaning space and DIFFERENT far
    embeddings = FixedEmbeddings({reference: [1.0, 0.0], MOST_DIFFERENT: [1.0, 0.01], DIFFERENT: [0.0, 1.0]})
    chat = ScriptedChat(json.dumps([DIFFERENT, MOST_DIFFERENT]))
    result = LlmParaphraser(chat, None, OfflineParaphraser(TEMPLATES), embedder=embeddings).paraphrase(question_for())
    assert result.text == DIFFERENT
    assert embeddings.calls == [[reference, DIFFERENT, MOST_DIFFERENT]]


def test_the_prompt_lists_every_slot_value_quoted_in_question_order():
    question = question_for()
    prompt = LlmParaphraser(ScriptedChat(), None, OfflineParaphraser(TEMPLATES), n_candidates=4).prompt(question)
    user = prompt[-1]["content"]
    assert f"Question: {question.template_question}" in user
    assert 'Values to copy exactly: "average", "potassium chloride", "10009628", "since 12/2100"' in user
    assert "Write 4 different paraphrases." in user


def test_without_a_surviving_candidate_the_offline_paraphrase_is_used_and_the_reason_recorded():
    questions = [question_for(), question_for(patient_id="10018845", answerable=False)]
    chat = ScriptedChat(json.dumps([LOST_SLOT, NEAR_COPY]), "Sure! Here you go:")
    report = paraphrase_questions(questions, LlmParaphraser(chat, None, OfflineParaphraser(TEMPLATES, seed=1)))
    assert report.to_dict() == {"questions": 2, "accepted": 0, "rejected_lost_slots": 1, "rejected_too_similar": 1,
                                "fallbacks": 2, "lost_slots": 0}
    first, second = questions
    expected = OfflineParaphraser(TEMPLATES, seed=1).paraphrase(question_for())
    assert (first.question, first.paraphrase_source) == (expected.text, expected.source)
    assert first.paraphrase_keeps_slots
    assert first.extra["paraphrase_fallback"] == ("no candidate kept: 1 of 2 lost a slot value, 1 too similar to "
                                                  "the template wording")
    assert second.extra["paraphrase_fallback"] == "the reply held no paraphrase"
    assert second.paraphrase_source.startswith("offline:")


def test_paraphrase_questions_sets_every_record_from_its_template_wording():
    questions = [question_for(), question_for(patient_id="10018845", answerable=False)]
    chat = ScriptedChat(json.dumps([DIFFERENT]), json.dumps([DIFFERENT.replace("10009628", "10018845")]))
    report = paraphrase_questions(questions, LlmParaphraser(chat, None, OfflineParaphraser(TEMPLATES)))
    assert report.accepted == 2 and report.fallbacks == 0
    assert [q.question for q in questions] == [DIFFERENT, DIFFERENT.replace("10009628", "10018845")]
    assert all(q.paraphrase_source == "llm:scripted" and q.paraphrase_keeps_slots for q in questions)
    assert all("paraphrase_fallback" not in q.extra for q in questions)
    assert questions[0].template_question == question_for().template_question  # the input stays


# --- cache --------------------------------------------------------------------------------------------------------

def test_cached_chat_asks_the_model_once_per_prompt_across_cache_instances(tmp_path):
    messages = [{"role": "user", "content": "hi"}]
    chat = ScriptedChat("first", "second", "third")
    assert CachedChat(chat, ResponseCache(tmp_path / "c" / "llm.sqlite")).complete(messages, temperature=0.5) == [
        "first"]
    again = CachedChat(chat, ResponseCache(tmp_path / "c" / "llm.sqlite"))
    assert again.complete(messages, temperature=0.5) == ["first"]
    assert again.complete(messages, temperature=0.7) == ["second"]  # another request, another key
    assert len(chat.requests) == 2


# --- configuration ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("spec", "expected"), [
    ("openai:gpt-4o-mini", ModelSpec("openai", "gpt-4o-mini")),
    ("openai:llama3@http://localhost:8000/v1", ModelSpec("openai", "llama3", "http://localhost:8000/v1")),
    ("openai:llama3:8b@http://localhost:11434/v1", ModelSpec("openai", "llama3:8b", "http://localhost:11434/v1")),
    ("gemini:gemini-2.0-flash", ModelSpec("gemini", "gemini-2.0-flash")),
])
def test_model_specs_parse(spec, expected):
    assert ModelSpec.parse(spec) == expected
    assert str(expected) == spec


@pytest.mark.parametrize("spec", ["gpt-4o-mini", "anthropic:claude", "openai:", "openai:m@localhost:8000",
                                  "gemini:gemini-2.0-flash@http://localhost:1/v1"])
def test_a_bad_model_spec_names_the_expected_form(spec):
    with pytest.raises(ValueError, match=r"openai:<model>, openai:<model>@<base_url> or gemini:<model>"):
        chat_model(spec)


def test_a_local_endpoint_needs_no_key_but_openai_does(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert OpenAIChat("llama3", base_url="http://127.0.0.1:9/v1").model == "llama3"
    with pytest.raises(ValueError, match="OPENAI_API_KEY"):
        chat_model("openai:gpt-4o-mini")


def test_a_gemini_model_needs_a_key(monkeypatch):
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    with pytest.raises(ValueError, match="GEMINI_API_KEY"):
        chat_model("gemini:gemini-2.0-flash")


def test_settings_come_from_parameters_then_environment_then_defaults(tmp_path):
    environ = {"EHRBENCH_PARAPHRASE_MODEL": "openai:llama3@http://127.0.0.1:9/v1",
               "EHRBENCH_EMBEDDING_MODEL": "openai:nomic-embed@http://127.0.0.1:9/v1"}
    settings = ParaphraseSettings.from_environment(tmp_path, environ, seed=7, model=None)
    assert settings.model == "openai:llama3@http://127.0.0.1:9/v1"
    assert settings.embedding_model == "openai:nomic-embed@http://127.0.0.1:9/v1"
    assert settings.cache_path == tmp_path / "cache" / "llm.sqlite"
    assert settings.seed == 7
    overridden = ParaphraseSettings.from_environment(
        tmp_path, environ | {"EHRBENCH_PARAPHRASE_CACHE": str(tmp_path / "elsewhere.sqlite")}, model="gemini:flash")
    assert (overridden.model, overridden.cache_path) == ("gemini:flash", tmp_path / "elsewhere.sqlite")
    assert ParaphraseSettings.from_environment(tmp_path, {}).model is None
    with pytest.raises(pydantic.ValidationError, match="is not of the form"):
        ParaphraseSettings.from_environment(tmp_path, {"EHRBENCH_PARAPHRASE_MODEL": "gpt-4o"})
    with pytest.raises(pydantic.ValidationError, match="only openai"):
        ParaphraseSettings.from_environment(tmp_path, {}, embedding_model="gemini:text-embedding-004")


def test_paraphraser_from_settings_is_offline_without_a_model_and_cached_with_one(tmp_path):
    offline = paraphraser_from_settings(TEMPLATES, ParaphraseSettings.from_environment(tmp_path, {}, seed=2))
    assert isinstance(offline, OfflineParaphraser) and offline.seed == 2
    settings = ParaphraseSettings.from_environment(tmp_path, {}, model="openai:llama3@http://127.0.0.1:9/v1")
    llm = paraphraser_from_settings(TEMPLATES, settings)
    assert isinstance(llm, LlmParaphraser) and llm.source == "llm:llama3"
    assert settings.cache_path.is_file()
