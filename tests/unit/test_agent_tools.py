"""The agent toolboxes on tiny hand-made databases: EHR-ChatQA's database tools (DuckDB and SQLite), value
similarity (lexical, synonyms, embeddings) and FHIR-AgentBench's tools. Expected texts and scores are worked out by
hand in the comments; a model's mistakes must come back as "Error: ..." text, never as an exception."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import duckdb
import pytest

from ehrbench.agents.sandbox import SqlError
from ehrbench.agents.tools import DatabaseTools, FhirTools, ValueSimilarity
from ehrbench.fhir.search import SearchIndex
from ehrbench.fhir.search_params import parse_search
from ehrbench.llm.tool_chat import ToolCall
from tests.fhir_fakes import write_resources_db

REPO = Path(__file__).resolve().parents[2]
BUILD = REPO / "data" / "benchmarks" / "latest"

DIAGNOSES = [("I10", "essential hypertension"), ("E875", "hyperpotassemia"), ("E876", "hypopotassemia"),
             ("R07", "chest pain"), ("X1", "o'brien syndrome"), ("X2", "100% oxygen_use")]
LAB_ROWS = 250


def call(toolbox, name: str, **arguments) -> str:
    return toolbox.call(ToolCall("call-1", name, arguments, json.dumps(arguments)))


# --- databases -------------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """One DuckDB and one SQLite database with the same tables."""
    folder = tmp_path_factory.mktemp("agent-db")
    labs = [(i, f"lab {i:03d}", i / 2) for i in range(LAB_ROWS)]
    with duckdb.connect(str(folder / "ehr.duckdb")) as con:
        con.execute("create table diagnoses (code varchar, title varchar)")
        con.executemany("insert into diagnoses values (?, ?)", DIAGNOSES)
        con.execute("create table labs (id integer, label varchar, value double)")
        con.executemany("insert into labs values (?, ?, ?)", labs)
        con.execute("create table drugs (name varchar)")
        con.executemany("insert into drugs values (?)", [("furosemide",), ("aspirin",), ("torsemide",)])
    lite = sqlite3.connect(folder / "ehr.sqlite")
    lite.execute("create table diagnoses (code text, title text)")
    lite.executemany("insert into diagnoses values (?, ?)", DIAGNOSES)
    lite.execute("create table labs (id integer, label text, value real)")
    lite.executemany("insert into labs values (?, ?, ?)", labs)
    lite.commit()
    lite.close()
    return folder


@pytest.fixture
def tools(folder: Path):
    with DatabaseTools(folder / "ehr.duckdb", similarity=ValueSimilarity()) as toolbox:
        yield toolbox


def test_table_search_lists_the_tables(tools):
    assert call(tools, "table_search") == "3 tables:\ndiagnoses\ndrugs\nlabs"


def test_column_search_shows_ddl_and_three_sample_rows(tools):
    text = call(tools, "column_search", table="diagnoses")
    assert text == ("CREATE TABLE diagnoses (\n  code VARCHAR,\n  title VARCHAR\n);\n\n3 sample rows:\n"
                    "code | title\nI10 | essential hypertension\nE875 | hyperpotassemia\nE876 | hypopotassemia")


def test_table_and_column_names_match_case_insensitively(tools):
    assert call(tools, "value_substring_search", table="DIAGNOSES", column="Title", value="chest") == (
        "1 distinct values of diagnoses.title containing 'chest' (shortest first):\nchest pain")


def test_value_substring_search_is_case_insensitive_shortest_first(tools):
    # hypopotassemia (14 characters) before hyperpotassemia (15)
    assert call(tools, "value_substring_search", table="diagnoses", column="title", value="POTASS") == (
        "2 distinct values of diagnoses.title containing 'POTASS' (shortest first):\nhypopotassemia\nhyperpotassemia")


def test_value_substring_search_says_when_k_cut_the_values(tools):
    text = call(tools, "value_substring_search", table="diagnoses", column="title", value="potass", k=1)
    assert text.splitlines()[:2] == ["1 distinct values of diagnoses.title containing 'potass' (shortest first):",
                                     "hypopotassemia"]
    assert "[more values match; only the first 1 are shown" in text


def test_value_substring_search_matches_non_text_columns(tools):
    assert call(tools, "value_substring_search", table="labs", column="id", value="249").endswith("\n249")


@pytest.mark.parametrize("value", ["x' OR '1'='1", "'; DROP TABLE diagnoses; --", "') UNION SELECT name FROM drugs --"])
def test_sql_in_a_searched_value_is_only_text(tools, value):
    assert call(tools, "value_substring_search", table="diagnoses", column="title", value=value).startswith(
        "No value of diagnoses.title contains")
    assert "6 row(s)" in call(tools, "sql_execute", query="select * from diagnoses")


def test_quotes_and_like_wildcards_in_a_value_are_plain_characters(tools):
    assert call(tools, "value_substring_search", table="diagnoses", column="title", value="o'brien").endswith(
        "\no'brien syndrome")
    # '%' and '_' would match everything under LIKE; here only the value holding them matches
    for value in ("%", "n_u"):
        assert call(tools, "value_substring_search", table="diagnoses", column="title", value=value).endswith(
            ":\n100% oxygen_use")


@pytest.mark.parametrize("name, arguments, expected", [
    ("column_search", {"table": "nope"}, "Error: unknown table 'nope'; the tables are: diagnoses, drugs, labs"),
    ("value_substring_search", {"table": "diagnoses", "column": "name", "value": "x"},
     "Error: unknown column 'name' in table diagnoses; its columns are: code, title"),
    ("column_search", {}, "Error: missing required argument(s) 'table'; 'column_search' takes: table"),
    ("value_similarity_search", {"table": "diagnoses", "column": "title"},
     "Error: missing required argument(s) 'value'; 'value_similarity_search' takes: table, column, value, k"),
    ("value_substring_search", {"table": "diagnoses", "column": "title", "value": "x", "k": 0},
     "Error: k must be an integer from 1 to 100, got 0"),
    ("value_substring_search", {"table": "diagnoses", "column": "title", "value": ""},
     "Error: value must be a non-empty piece of text to look for"),
    ("sql_execute", {"query": "select 1", "k": "ten"}, "Error: argument 'k' must be an integer, got 'ten'"),
    ("sql_execute", {"query": "select 1", "k": True}, "Error: argument 'k' must be an integer, got True"),
    ("column_search", {"table": 3}, "Error: argument 'table' must be a string, got int"),
    ("table_search", {"filter": "lab"}, "Error: unexpected argument(s) 'filter'; 'table_search' takes: no arguments"),
    ("drop_table", {}, "Error: there is no tool named 'drop_table'; the tools are: table_search, column_search, "
                       "value_substring_search, value_similarity_search, sql_execute"),
])
def test_bad_calls_are_explained_not_raised(tools, name, arguments, expected):
    assert call(tools, name, **arguments) == expected


def test_a_call_the_client_already_rejected_is_answered_with_its_error(tools):
    rejected = ToolCall("c", "sql_execute", None, "{not json", error="the arguments are not valid JSON")
    assert tools.call(rejected) == "Error: the arguments are not valid JSON"


def test_sql_execute_returns_rows_as_a_table(tools):
    assert call(tools, "sql_execute", query="select code, title from diagnoses where title = 'chest pain'") == (
        "1 row(s):\ncode | title\nR07 | chest pain")
    assert call(tools, "sql_execute", query="select null as a, 1.5 as b, date '2180-07-23' as c") == (
        "1 row(s):\na | b | c\nNULL | 1.5 | 2180-07-23")


def test_sql_execute_notes_rows_past_k_and_caps_k(tools):
    text = call(tools, "sql_execute", query="select id from labs order by id", k=5)
    assert text.splitlines() == ["the first 5 rows (the query returned more; add WHERE filters, aggregate, or "
                                 "ORDER BY ... LIMIT to see what you need):", "id", "0", "1", "2", "3", "4"]
    capped = call(tools, "sql_execute", query="select id from labs order by id", k=500)
    assert capped.startswith("the first 100 rows (the query returned more; k is capped at 100;")
    assert capped.splitlines()[-1] == "99"


def test_long_results_are_cut_with_a_note(folder):
    with DatabaseTools(folder / "ehr.duckdb", max_chars=500) as toolbox:
        text = call(toolbox, "sql_execute", query="select * from labs order by id")
    assert len(text) <= 500
    assert "[output truncated to" in text and "select fewer columns or rows" in text
    assert text.splitlines()[2] == "0 | lab 000 | 0.0"


@pytest.mark.parametrize("database", ["ehr.duckdb", "ehr.sqlite"])
@pytest.mark.parametrize("query", [
    "ATTACH '{folder}/other.db' AS other",
    "COPY (SELECT * FROM diagnoses) TO '{folder}/stolen.csv'",
    "SELECT * FROM read_csv('/etc/passwd')",
    "CREATE TABLE x (a INTEGER)",
    "DELETE FROM diagnoses",
    "SELECT 1; SELECT 2",
])
def test_sql_execute_refuses_escapes_as_errors(folder, database, query):
    with DatabaseTools(folder / database) as toolbox:
        text = call(toolbox, "sql_execute", query=query.format(folder=folder))
        assert text.startswith("Error: "), text
        assert "6 row(s)" in call(toolbox, "sql_execute", query="select * from diagnoses")
    assert not (folder / "stolen.csv").exists() and not (folder / "other.db").exists()


def test_sqlite_databases_work_too(folder):
    with DatabaseTools(folder / "ehr.sqlite") as toolbox:
        assert toolbox.engine == "sqlite"
        assert call(toolbox, "table_search") == "2 tables:\ndiagnoses\nlabs"
        assert call(toolbox, "column_search", table="labs").startswith(
            "CREATE TABLE labs (\n  id INTEGER,\n  label TEXT,\n  value REAL\n);\n\n"
            "3 sample rows:\nid | label | value\n0 | lab 000 | 0.0\n")
        assert call(toolbox, "value_substring_search", table="diagnoses", column="title", value="POTASS").endswith(
            ":\nhypopotassemia\nhyperpotassemia")
        assert call(toolbox, "value_substring_search", table="labs", column="value", value="124.5").endswith(
            ":\n124.5")
        assert call(toolbox, "sql_execute", query="select count(*) as n from labs") == "1 row(s):\nn\n250"


def test_value_similarity_search_marks_synonyms_and_finds_typos(tools):
    # 'hyperkalemia' is an `also` name of "high potassium" in lay_terms.yaml, whose stored values include
    # hyperpotassemia; 'hypopotassemia' is only lexically close
    text = call(tools, "value_similarity_search", table="diagnoses", column="title", value="hyperkalemia", k=2)
    lines = text.splitlines()
    assert lines[0].startswith("2 of 6 distinct values of diagnoses.title ranked by similarity to 'hyperkalemia'")
    assert lines[1:3] == ["value | score | match", "hyperpotassemia | 1.000 | synonym"]
    assert lines[3].startswith("hypopotassemia | ") and lines[3].endswith(" | similar")
    typo = call(tools, "value_similarity_search", table="diagnoses", column="title", value="hypertenshun", k=1)
    assert typo.splitlines()[2].startswith("essential hypertension | ")
    brand = call(tools, "value_similarity_search", table="drugs", column="name", value="Lasix", k=1)
    assert brand.splitlines()[2] == "furosemide | 1.000 | synonym"


def test_a_subset_of_tools_can_be_offered(folder):
    with DatabaseTools(folder / "ehr.duckdb", tools=("table_search", "column_search", "sql_execute")) as toolbox:
        assert [spec.name for spec in toolbox.specs] == ["table_search", "column_search", "sql_execute"]
        assert call(toolbox, "value_substring_search", table="labs", column="label", value="x").startswith(
            "Error: there is no tool named 'value_substring_search'; the tools are: table_search, column_search, "
            "sql_execute")
    with pytest.raises(ValueError, match="unknown database tool"):
        DatabaseTools(folder / "ehr.duckdb", tools=("web_search",))


def test_execute_rows_runs_the_answer_sql_in_the_sandbox(tools):
    result = tools.execute_rows("select id from labs order by id")
    assert len(result.rows) == LAB_ROWS and not result.truncated and result.columns == ["id"]
    assert tools.execute_rows("select id from labs", max_rows=10).truncated
    with pytest.raises(SqlError):
        tools.execute_rows("select * from read_csv('/etc/passwd')")


# --- value similarity ------------------------------------------------------------------------------------------------

def test_a_typo_finds_the_value_with_its_edit_distance_score():
    # ratio('furosemde', 'furosemide') = 1 - 1 insertion / 19 characters = 0.9474; token_set_ratio gives the same
    # times 0.95, partial_ratio 2*8/18 = 0.889 times 0.9: the max is 0.9474
    ranked = ValueSimilarity(synonyms=None).rank("furosemde", ["aspirin", "torsemide", "furosemide"], k=2)
    assert ranked[0] == ("furosemide", pytest.approx(0.9474, abs=1e-4))
    assert ranked[1][0] == "torsemide"


def test_scores_order_same_value_then_all_words_then_ties_by_closeness_and_value():
    similarity = ValueSimilarity(synonyms=None)
    assert similarity.rank("Aspirin", ["aspirin"], k=1) == [("aspirin", 1.0)]
    # both hold every word of the query (0.95); the closer whole string (ratio 2*12/31 = 0.77 against 2*12/36 =
    # 0.67) comes first although value order says otherwise
    ranked = similarity.rank("hypertension", ["accelerated hypertension", "benign hypertension"], k=2)
    assert ranked == [("benign hypertension", 0.95), ("accelerated hypertension", 0.95)]
    # equal on everything: value order
    assert similarity.rank("x", ["b x", "a x"], k=2) == [("a x", 0.95), ("b x", 0.95)]
    assert similarity.rank("x", [], k=3) == [] and similarity.rank("x", ["x"], k=0) == []


def test_synonyms_score_one_in_both_drug_directions():
    similarity = ValueSimilarity()
    ranked = similarity.rank("High Potassium", ["potassium", "hyperpotassemia", "hypopotassemia"], k=3)
    assert ranked[0] == ("hyperpotassemia", 1.0)
    assert all(score < 1.0 for _, score in ranked[1:])
    assert similarity.synonym_hits("high potassium", ["HYPERKALEMIA", "potassium"]) == {"HYPERKALEMIA"}
    assert similarity.rank("lasix", ["furosemide", "lasix 40mg"], k=1) == [("furosemide", 1.0)]
    assert similarity.rank("furosemide", ["Lasix", "aspirin"], k=1) == [("Lasix", 1.0)]
    without = ValueSimilarity(synonyms=None).rank("high potassium", ["hyperpotassemia"], k=1)
    assert without[0][1] < 0.9


class FakeEmbedder:
    """Two-dimensional vectors by hand: 'heart attack' and 'myocardial infarction' point the same way."""

    provider, model = "fake", "fake"
    vectors = {"heart attack": [1.0, 0.0], "myocardial infarction": [2.0, 0.0], "heart rate": [0.8, 0.6],
               "aspirin": [0.0, 1.0]}

    def __init__(self):
        self.calls: list[list[str]] = []

    def embed(self, texts: list[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        return [self.vectors[text] for text in texts]


def test_an_embedder_lifts_semantic_matches_and_caches_candidates():
    candidates = ["heart rate", "myocardial infarction", "aspirin"]
    lexical = ValueSimilarity(synonyms=None).rank("heart attack", candidates, k=3)
    assert lexical[0][0] == "heart rate"
    embedder = FakeEmbedder()
    similarity = ValueSimilarity(synonyms=None, embedder=embedder)
    ranked = similarity.rank("heart attack", candidates, k=3)
    assert ranked[0] == ("myocardial infarction", 1.0)  # cosine 1.0 beats any lexical score
    # the max of lexical and cosine: 'heart rate' is 0.7273 lexically (ratio: 8 characters in common in order,
    # 2*8/22; partial_ratio does not count for a value shorter than the query), 0.8 by cosine; aspirin's cosine is 0
    assert dict(lexical)["heart rate"] < 0.8 and dict(ranked)["heart rate"] == 0.8
    assert dict(ranked)["aspirin"] == dict(lexical)["aspirin"]
    assert embedder.calls == [["heart attack", "aspirin", "heart rate", "myocardial infarction"]]  # one call
    similarity.rank("heart attack", candidates, k=1)
    assert embedder.calls[1] == ["heart attack"]  # candidates come from the cache


# --- FHIR ------------------------------------------------------------------------------------------------------------

LAB = "http://mimic.mit.edu/fhir/mimic/CodeSystem/mimic-d-labitems"


def _observation(id_: str, patient: str, code: str, when: str) -> dict:
    return {"resourceType": "Observation", "id": id_, "status": "final",
            "subject": {"reference": f"Patient/{patient}"},
            "code": {"coding": [{"system": LAB, "code": code}]}, "effectiveDateTime": when}


RESOURCES = [
    {"resourceType": "Patient", "id": "pat-a", "gender": "female"},
    {"resourceType": "Patient", "id": "pat-b", "gender": "male"},
    {"resourceType": "Encounter", "id": "enc-a1", "status": "finished", "subject": {"reference": "Patient/pat-a"},
     "period": {"start": "2180-07-20T08:00:00-04:00", "end": "2180-07-23T12:00:00-04:00"}},
    _observation("obs-a1", "pat-a", "50912", "2180-07-21T08:00:00-04:00"),
    _observation("obs-a2", "pat-a", "50912", "2180-07-23T08:00:00-04:00"),
    _observation("obs-a3", "pat-a", "50971", "2180-07-24T08:00:00-04:00"),
    _observation("obs-b1", "pat-b", "50912", "2180-07-22T08:00:00-04:00"),
    {"resourceType": "Medication", "id": "med-1", "code": {"coding": [{"system": "ndc", "code": "0001"}]}},
]


@pytest.fixture(scope="module")
def resources_db(tmp_path_factory) -> Path:
    return write_resources_db(tmp_path_factory.mktemp("fhir") / "resources.duckdb", RESOURCES)


@pytest.fixture(scope="module")
def index(resources_db: Path):
    index = SearchIndex(resources_db)
    yield index
    index.close()


@pytest.fixture
def fhir(resources_db: Path, index: SearchIndex) -> FhirTools:
    return FhirTools(resources_db, index=index)


def test_get_resources_by_patient_returns_compact_json_lines(fhir):
    lines = call(fhir, "get_resources_by_patient", resource_type="Observation", patient_id="pat-a").splitlines()
    assert lines[0] == "Observation resources of Patient pat-a: all 3, one per line"
    assert [json.loads(line)["id"] for line in lines[1:]] == ["obs-a1", "obs-a2", "obs-a3"]  # by date
    assert json.loads(lines[1]) == RESOURCES[3] and ", " not in lines[1]
    assert call(fhir, "get_resources_by_patient", resource_type="encounter", patient_id="Patient/pat-b") == (
        "Patient pat-b has no Encounter resources.")


@pytest.mark.parametrize("arguments, expected", [
    ({"resource_type": "Medication", "patient_id": "pat-a"},
     "Error: Medication resources do not belong to a patient; read one with get_resource or search them with "
     "fhir_search"),
    ({"resource_type": "Observation", "patient_id": "nobody"},
     "Error: no Patient with id 'nobody'; patient_id is the Patient resource's FHIR id"),
    ({"resource_type": "Foo", "patient_id": "pat-a"},
     "Error: unknown resource type 'Foo'; this server has: Encounter, Medication, Observation, Patient"),
    ({"resource_type": "Observation"}, "Error: missing required argument(s) 'patient_id'; "
                                       "'get_resources_by_patient' takes: resource_type, patient_id"),
])
def test_get_resources_by_patient_errors(fhir, arguments, expected):
    assert call(fhir, "get_resources_by_patient", **arguments) == expected


def test_get_resource_reads_one_or_explains(fhir):
    assert json.loads(call(fhir, "get_resource", resource_type="Medication", id="med-1")) == RESOURCES[-1]
    assert json.loads(call(fhir, "get_resource", resource_type="Patient", id="Patient/pat-b"))["gender"] == "male"
    assert call(fhir, "get_resource", resource_type="Observation", id="obs-zz") == (
        "Error: Observation/obs-zz not found; use an id from a tool's result or a reference's '<Type>/<id>'")


def test_fhir_search_pages_with_a_next_page_hint(fhir):
    first = call(fhir, "fhir_search", query_string="Observation?patient=pat-a&_count=2").splitlines()
    assert first[0] == ("Observation?patient=pat-a&_count=2: 3 matching resources; this page (_offset 0, _count 2) "
                        "has 2: obs-a1, obs-a2")
    assert first[1] == "next page: Observation?patient=pat-a&_count=2&_offset=2"
    assert [json.loads(line)["id"] for line in first[2:]] == ["obs-a1", "obs-a2"]
    last = call(fhir, "fhir_search", query_string=first[1].removeprefix("next page: ")).splitlines()
    assert last[0].endswith("this page (_offset 2, _count 2) has 1: obs-a3")
    assert json.loads(last[1])["id"] == "obs-a3" and len(last) == 2  # no next page


def test_fhir_search_filters_by_code_and_date(fhir):
    # code 50912 on or after 2180-07-22: obs-a2 (07-23) and obs-b1 (07-22), not obs-a1 (07-21) nor obs-a3 (50971)
    text = call(fhir, "fhir_search", query_string="/Observation?code=50912&date=ge2180-07-22")
    assert text.splitlines()[0].endswith("2 matching resources; this page (_offset 0, _count 50) has 2: obs-b1, obs-a2")
    assert call(fhir, "fhir_search", query_string="Observation?patient=pat-b&code=50971") == (
        "Observation?patient=pat-b&code=50971: 0 matching resources.")


@pytest.mark.parametrize("query_string, expected", [
    ("Observation?foo=1", "Error: unknown search parameter 'foo' for Observation"),
    ("Observation?date=zz2180", "Error: unsupported date prefix 'zz'"),
    ("Observation/obs-a1", "Error: query_string must look like '<Type>?<param>=<value>&...'"),
    ("Bar?patient=pat-a", "Error: unknown resource type 'Bar'"),
])
def test_fhir_search_errors_come_back_as_text(fhir, query_string, expected):
    assert call(fhir, "fhir_search", query_string=query_string).startswith(expected)


def test_execute_python_sees_the_retrieved_resources(fhir):
    call(fhir, "get_resources_by_patient", resource_type="Observation", patient_id="pat-a")
    call(fhir, "get_resource", resource_type="Patient", id="pat-a")
    code = ("import json\nresources = json.load(open('resources.json'))\n"
            "print(len(resources), sorted(r['id'] for r in resources if r['resourceType'] == 'Observation'))")
    assert call(fhir, "execute_python", code=code) == (
        "exit status 0 (4 resources were in resources.json)\nstdout:\n4 ['obs-a1', 'obs-a2', 'obs-a3']")
    failed = call(fhir, "execute_python", code="print(1 / 0)")
    assert failed.startswith("exit status 1 ") and "stdout: (empty)\nstderr:\n" in failed
    assert "ZeroDivisionError" in failed
    assert call(fhir, "execute_python", code="  ") == (
        "Error: code is empty; send a Python program that prints its result")


def test_execute_python_reports_a_timeout(resources_db, index):
    with FhirTools(resources_db, index=index, python_timeout_s=1) as toolbox:
        text = call(toolbox, "execute_python", code="while True:\n    pass")
    assert "killed: " in text and ("timeout" in text or "CPU time" in text)


def test_retrieved_ids_are_every_returned_id_once_in_first_seen_order(fhir):
    assert fhir.retrieved_ids == []
    call(fhir, "fhir_search", query_string="Observation?code=50912&_count=2")  # obs-a1, obs-b1
    call(fhir, "get_resources_by_patient", resource_type="Observation", patient_id="pat-a")  # obs-a1..a3
    call(fhir, "get_resource", resource_type="Observation", id="obs-a2")
    call(fhir, "get_resource", resource_type="Observation", id="obs-missing")  # an error returns nothing
    call(fhir, "fhir_search", query_string="Observation?patient=pat-a&_count=0")  # a total only
    assert fhir.retrieved_ids == ["obs-a1", "obs-b1", "obs-a2", "obs-a3"]


def test_long_results_are_cut_with_a_note_on_where_the_rest_is(resources_db, index):
    with FhirTools(resources_db, index=index, max_chars=400) as toolbox:
        text = call(toolbox, "get_resources_by_patient", resource_type="Observation", patient_id="pat-a")
        assert len(text) <= 400 and "[output truncated to" in text and "in resources.json" in text
        assert toolbox.retrieved_ids == ["obs-a1", "obs-a2", "obs-a3"]  # all returned, if not all shown


@pytest.mark.parametrize("variant, names", [
    ("retriever", ["get_resources_by_patient", "get_resource"]),
    ("search", ["fhir_search", "get_resource"]),
    ("code", ["get_resources_by_patient", "get_resource", "fhir_search", "execute_python"]),
])
def test_variants_offer_their_tools_only(resources_db, index, variant, names):
    toolbox = FhirTools(resources_db, index=index, variant=variant)
    assert [spec.name for spec in toolbox.specs] == names
    for missing in {"get_resources_by_patient", "fhir_search", "execute_python"} - set(names):
        assert call(toolbox, missing, code="print(1)").startswith(f"Error: there is no tool named '{missing}'")


def test_an_owned_index_is_closed_and_a_shared_one_is_not(resources_db, index):
    with pytest.raises(ValueError, match="unknown FHIR tools variant"):
        FhirTools(resources_db, index=index, variant="agentic")
    with FhirTools(resources_db) as owner:
        assert call(owner, "get_resource", resource_type="Patient", id="pat-a").startswith('{"resourceType"')
    with FhirTools(resources_db, index=index):
        pass
    assert index.read("Patient", "pat-a") is not None


# --- the real build (skipped without it) -----------------------------------------------------------------------------

def test_the_tools_on_the_latest_build():
    if not (BUILD / "db").is_dir() or not (BUILD / "fhir" / "resources.duckdb").is_file():
        pytest.skip(f"no built benchmark at {BUILD}")
    from ehrbench.profiles import BenchmarkDatabase

    database = BenchmarkDatabase("renamed", "mimic_iv").files(BUILD)[0]
    with DatabaseTools(database) as toolbox:
        assert "labresults" in call(toolbox, "table_search").splitlines()
        assert call(toolbox, "value_similarity_search", table="medicationorders", column="medicationname",
                    value="Lasix", k=3).splitlines()[2] == "furosemide | 1.000 | synonym"
    with FhirTools(BUILD / "fhir" / "resources.duckdb") as toolbox:
        patient = toolbox.index.search(parse_search("Patient", [("_count", "1")])).ids[0]
        text = call(toolbox, "get_resources_by_patient", resource_type="Encounter", patient_id=patient)
        assert text.startswith(f"Encounter resources of Patient {patient}: all ")
        assert toolbox.retrieved_ids
