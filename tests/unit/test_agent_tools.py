"""The agent toolboxes on tiny hand-made databases: EHR-ChatQA's database tools (DuckDB and SQLite), value
similarity (lexical, synonyms, embeddings), web search and FHIR-AgentBench's tools. A model's mistakes must come back
as "Error: ..." text, never as an exception.

The database tools are EHR-ChatQA's as published (glee4810/EHR-ChatQA, src/envs/<db>_star/tools/*.py): the expected
tool definitions and result texts below are the published ones, worked out by hand for these tables."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import duckdb
import pytest

from ehrbench.agents.sandbox import SqlError
from ehrbench.agents.tools import DatabaseTools, FhirTools, ValueSimilarity, WebResult
from ehrbench.agents.tools.similarity import CURATED
from ehrbench.agents.tools.web_search import (
    HttpSearchProvider,
    WebSearchError,
    check_provider_spec,
    provider_for,
    register_provider,
)
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
    """One DuckDB and one SQLite database with the same tables, and a SQLite database declared as the published
    schema files declare theirs (INT, NOT NULL, primary, foreign and unique keys)."""
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
    lite.execute("create table demographics (recordid INT NOT NULL PRIMARY KEY, patientid INT NOT NULL UNIQUE, "
                 "gender TEXT NOT NULL, dateofdeath TEXT)")
    lite.execute("insert into demographics values (1, 10, 'f', null), (2, 11, 'm', '2100-03-04 05:06:07')")
    lite.execute("create table hospitaladmissions (recordid INT NOT NULL PRIMARY KEY, patientid INT NOT NULL, "
                 "admitdatetime TEXT NOT NULL, FOREIGN KEY(patientid) REFERENCES demographics(patientid))")
    lite.commit()
    lite.close()
    return folder


@pytest.fixture
def tools(folder: Path):
    with DatabaseTools(folder / "ehr.duckdb") as toolbox:
        yield toolbox


def test_the_tools_are_defined_as_published(tools):
    # names, order, descriptions and arguments of src/envs/mimic_iv_star/tools/*.py (env.py's order); no "default"
    # keys: the published schemas say the defaults in the descriptions
    specs = {spec.name: spec for spec in tools.specs}
    assert list(specs) == ["table_search", "column_search", "sql_execute", "value_substring_search",
                           "value_similarity_search"]
    assert specs["table_search"].description == "Get the list of table names in the database."
    assert specs["table_search"].parameters == {"type": "object", "properties": {"tool_input": {
        "type": "string", "description": "An empty string; no input required."}}, "required": []}
    assert specs["column_search"].description == "Get the columns of a specific table and its sample rows."
    assert specs["column_search"].parameters == {"type": "object", "properties": {"table_names": {
        "type": "string", "description": "A comma-separated list of table names to retrieve schema and sample rows "
                                         "for."}}, "required": ["table_names"]}
    assert specs["sql_execute"].description == (
        "Execute a SQL query against the database and get back the result. If the query is not correct, an error "
        "message will be returned. The maximum number of results to return is 100.")
    assert specs["sql_execute"].parameters == {"type": "object", "properties": {
        "query": {"type": "string", "description": "A valid SQL query to execute."},
        "k": {"type": "integer", "description": "The maximum number of results to return. Default is 100."},
        "timeout": {"type": "integer", "description": "Maximum execution time in seconds before the query is "
                                                      "terminated. Default is 60 seconds."}}, "required": ["query"]}
    assert specs["value_substring_search"].description == (
        "Retrieve up to k values from a column that contains the specified substring.")
    assert specs["value_substring_search"].parameters == {"type": "object", "properties": {
        "table": {"type": "string", "description": "The table name."},
        "column": {"type": "string", "description": "The column name."},
        "value": {"type": "string", "description": "The substring to search for."},
        "k": {"type": "integer", "description": "The maximum number of values to return. Default is 100."}},
        "required": ["table", "column", "value"]}
    assert specs["value_similarity_search"].parameters == {"type": "object", "properties": {
        "table": {"type": "string", "description": "The table name."},
        "column": {"type": "string", "description": "The column name."},
        "value": {"type": "string", "description": "The value to search for similar matches."},
        "k": {"type": "integer", "description": "The number of similar values to return. Default is 100."}},
        "required": ["table", "column", "value"]}
    # a database that is not one of EHR-ChatQA's: every text column is searchable; no embedding model: lexical
    assert specs["value_similarity_search"].description == (
        "Perform a lexical similarity search (fuzzy string matching) to find up to k values similar to a given "
        "value in a specified column. Supported columns: diagnoses: ['code', 'title'], drugs: ['name'], "
        "labs: ['label']")
    assert (tools.value_search, tools.web_search_name) == ("lexical", "disabled")


def test_table_search_joins_the_names_with_commas(tools):
    assert call(tools, "table_search") == "diagnoses, drugs, labs"  # published: ", ".join(table names)
    assert call(tools, "table_search", tool_input="") == "diagnoses, drugs, labs"


def test_column_search_shows_ddl_and_three_sample_rows_per_table(tools):
    # published: CREATE TABLE with tab-indented columns, then "/*\n3 rows from <t> table:" with tab-separated rows;
    # tables joined by two blank lines, an unknown one as its error; names resolve case-insensitively (SQLite does)
    text = call(tools, "column_search", table_names="diagnoses, DRUGS,nope")
    assert text == ("CREATE TABLE diagnoses (\n\tcode VARCHAR,\n\ttitle VARCHAR\n)\n/*\n3 rows from diagnoses table:\n"
                    "code\ttitle\nI10\tessential hypertension\nE875\thyperpotassemia\nE876\thypopotassemia\n*/"
                    "\n\n\n"
                    "CREATE TABLE drugs (\n\tname VARCHAR\n)\n/*\n3 rows from drugs table:\nname\n"
                    "furosemide\naspirin\ntorsemide\n*/"
                    "\n\n\n"
                    "Error: table_names {'nope'} not found in database")


def test_column_search_shows_keys_and_not_null_as_the_published_schema_declares_them(folder):
    # the published rules: INT -> INTEGER, "NOT NULL", then PRIMARY KEY, FOREIGN KEY and UNIQUE lines; cells as
    # Python prints them (None); "3 rows" whatever the table holds
    with DatabaseTools(folder / "ehr.sqlite") as toolbox:
        assert call(toolbox, "column_search", table_names="demographics,hospitaladmissions") == (
            "CREATE TABLE demographics (\n\trecordid INTEGER NOT NULL,\n\tpatientid INTEGER NOT NULL,\n"
            "\tgender TEXT NOT NULL,\n\tdateofdeath TEXT,\n\tPRIMARY KEY (recordid),\n\tUNIQUE (patientid)\n)"
            "\n/*\n3 rows from demographics table:\nrecordid\tpatientid\tgender\tdateofdeath\n"
            "1\t10\tf\tNone\n2\t11\tm\t2100-03-04 05:06:07\n*/"
            "\n\n\n"
            "CREATE TABLE hospitaladmissions (\n\trecordid INTEGER NOT NULL,\n\tpatientid INTEGER NOT NULL,\n"
            "\tadmitdatetime TEXT NOT NULL,\n\tPRIMARY KEY (recordid),\n"
            "\tFOREIGN KEY (patientid) REFERENCES demographics (patientid)\n)"
            "\n/*\n3 rows from hospitaladmissions table:\nrecordid\tpatientid\tadmitdatetime\n\n*/")


def test_sql_execute_returns_the_rows_as_python_prints_them(tools):
    # published: str(rows[:k]), a list of tuples; on DuckDB the values SQLite would hold (text times, 0/1)
    assert call(tools, "sql_execute", query="select code, title from diagnoses where title = 'chest pain'") == (
        "[('R07', 'chest pain')]")
    assert call(tools, "sql_execute", query="select null as a, 1.5 as b, date '2180-07-23' as c, "
                                            "timestamp '2180-07-23 08:00:00' as d, true as e, 2::decimal(4,1) f") == (
        "[(None, 1.5, '2180-07-23', '2180-07-23 08:00:00', 1, 2.0)]")
    assert call(tools, "sql_execute", query="select * from drugs where name = 'none'") == "[]"
    assert call(tools, "sql_execute", query="select count(*) from labs") == "[(250,)]"


def test_sql_execute_notes_the_rows_not_shown_and_caps_k_at_100(tools):
    # published: rows[:k] + "\n\nNote: There are {n - k} results not shown (out of {n} total results)."
    assert call(tools, "sql_execute", query="select id from labs order by id", k=5) == (
        "[(0,), (1,), (2,), (3,), (4,)]\n\nNote: There are 245 results not shown (out of 250 total results).")
    capped = call(tools, "sql_execute", query="select id from labs order by id;  ", k=500)  # "at most 100"
    assert capped.startswith("[(0,), (1,), ") and capped.count("(") == 100 + 1  # 100 rows and the note's
    assert capped.endswith("(99,)]\n\nNote: There are 150 results not shown (out of 250 total results).")
    commented = call(tools, "sql_execute", query="select id from labs -- every lab", k=1)
    assert commented == "[(0,)]\n\nNote: There are 249 results not shown (out of 250 total results)."


@pytest.mark.slow  # waits out a timeout
def test_sql_execute_takes_the_published_timeout_argument(folder):
    endless = "with recursive r(n) as (select 1 union all select n + 1 from r) select count(*) from r"
    with DatabaseTools(folder / "ehr.sqlite", timeout_s=30) as toolbox:
        text = call(toolbox, "sql_execute", query=endless, timeout=1)  # asks for less than the toolbox allows
        assert text.startswith("Error: query exceeded 1 s and was stopped")
        assert call(toolbox, "sql_execute", query="select count(*) from labs", timeout=120) == "[(250,)]"
        assert call(toolbox, "sql_execute", query="select 1", timeout=0) == (
            "Error: timeout must be a number of seconds of at least 1, got 0")


def test_value_substring_search_is_the_published_like_search(tools):
    # published: DISTINCT values WHERE column LIKE '%value%' (case-insensitive), LIMIT k, printed as a list
    assert call(tools, "value_substring_search", table="diagnoses", column="title", value="POTASS") == (
        "Values in diagnoses.title containing 'POTASS': ['hyperpotassemia', 'hypopotassemia'].")
    assert call(tools, "value_substring_search", table="diagnoses", column="title", value="potass", k=1) == (
        "Values in diagnoses.title containing 'potass': ['hyperpotassemia'].")
    assert call(tools, "value_substring_search", table="labs", column="id", value="249") == (
        "Values in labs.id containing '249': [249].")  # a number column: its stored numbers
    assert call(tools, "value_substring_search", table="DIAGNOSES", column="Title", value="chest") == (
        "Values in DIAGNOSES.Title containing 'chest': ['chest pain'].")  # echoes the names as asked
    assert call(tools, "value_substring_search", table="drugs", column="name", value="xyz") == (
        "No values in drugs.name contain 'xyz'.")


def test_like_wildcards_in_a_value_are_wildcards_and_quotes_are_text(tools):
    # the published search puts the value inside a LIKE pattern: '%' matches anything, '_' any one character
    assert call(tools, "value_substring_search", table="drugs", column="name", value="%") == (
        "Values in drugs.name containing '%': ['aspirin', 'furosemide', 'torsemide'].")
    assert call(tools, "value_substring_search", table="drugs", column="name", value="s_m") == (
        "Values in drugs.name containing 's_m': ['furosemide', 'torsemide'].")
    assert call(tools, "value_substring_search", table="diagnoses", column="title", value="o'brien") == (
        "Values in diagnoses.title containing 'o'brien': [\"o'brien syndrome\"].")


@pytest.mark.parametrize("value", ["x' OR '1'='1", "'; DROP TABLE diagnoses; --", "') UNION SELECT name FROM drugs --"])
def test_sql_in_a_searched_value_is_only_text(tools, value):
    assert call(tools, "value_substring_search", table="diagnoses", column="title", value=value) == (
        f"No values in diagnoses.title contain '{value}'.")
    assert call(tools, "sql_execute", query="select count(*) from diagnoses") == "[(6,)]"


@pytest.mark.parametrize("name, arguments, expected", [
    ("value_substring_search", {"table": "nope", "column": "x", "value": "x"},
     "Error: unknown table 'nope'; the tables are: diagnoses, drugs, labs"),
    ("value_substring_search", {"table": "diagnoses", "column": "name", "value": "x"},
     "Error: unknown column 'name' in table diagnoses; its columns are: code, title"),
    ("column_search", {}, "Error: missing required argument(s) 'table_names'; 'column_search' takes: table_names"),
    ("value_similarity_search", {"table": "diagnoses", "column": "title"},
     "Error: missing required argument(s) 'value'; 'value_similarity_search' takes: table, column, value, k"),
    ("value_substring_search", {"table": "diagnoses", "column": "title", "value": "x", "k": 0},
     "Error: k must be an integer from 1 to 1000, got 0"),
    ("sql_execute", {"query": "select 1", "k": "ten"}, "Error: argument 'k' must be an integer, got 'ten'"),
    ("sql_execute", {"query": "select 1", "k": True}, "Error: argument 'k' must be an integer, got True"),
    ("column_search", {"table_names": 3}, "Error: argument 'table_names' must be a string, got int"),
    ("table_search", {"filter": "lab"}, "Error: unexpected argument(s) 'filter'; 'table_search' takes: tool_input"),
    ("drop_table", {}, "Error: there is no tool named 'drop_table'; the tools are: table_search, column_search, "
                       "sql_execute, value_substring_search, value_similarity_search"),
])
def test_bad_calls_are_explained_not_raised(tools, name, arguments, expected):
    assert call(tools, name, **arguments) == expected


def test_a_call_the_client_already_rejected_is_answered_with_its_error(tools):
    rejected = ToolCall("c", "sql_execute", None, "{not json", error="the arguments are not valid JSON")
    assert tools.call(rejected) == "Error: the arguments are not valid JSON"


def test_long_results_can_be_cut_with_a_note(folder):
    with DatabaseTools(folder / "ehr.duckdb", max_chars=500) as toolbox:
        text = call(toolbox, "sql_execute", query="select * from labs order by id")
    assert len(text) <= 500
    assert "[output truncated to" in text and "select fewer columns or rows" in text


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
        assert call(toolbox, "sql_execute", query="select count(*) from diagnoses") == "[(6,)]"
    assert not (folder / "stolen.csv").exists() and not (folder / "other.db").exists()


def test_sqlite_databases_work_too(folder):
    with DatabaseTools(folder / "ehr.sqlite") as toolbox:
        assert toolbox.engine == "sqlite"
        assert call(toolbox, "table_search") == "demographics, diagnoses, hospitaladmissions, labs"
        assert call(toolbox, "column_search", table_names="labs").startswith(
            "CREATE TABLE labs (\n\tid INTEGER,\n\tlabel TEXT,\n\tvalue REAL\n)\n/*\n3 rows from labs table:\n"
            "id\tlabel\tvalue\n0\tlab 000\t0.0\n")
        assert call(toolbox, "value_substring_search", table="diagnoses", column="title", value="POTASS") == (
            "Values in diagnoses.title containing 'POTASS': ['hyperpotassemia', 'hypopotassemia'].")
        assert call(toolbox, "value_substring_search", table="labs", column="value", value="124.5") == (
            "Values in labs.value containing '124.5': [124.5].")
        assert call(toolbox, "sql_execute", query="select count(*) as n from labs") == "[(250,)]"


def test_value_similarity_search_answers_as_published(tools):
    # published: the value lower-cased, the k nearest values; one match, several, or none
    assert call(tools, "value_similarity_search", table="diagnoses", column="title", value="Hypertenshun", k=1) == (
        "I found one close match in diagnoses.title: 'essential hypertension'.")
    assert call(tools, "value_similarity_search", table="drugs", column="name", value="furosemde", k=2) == (
        "I found close matches in drugs.name: ['furosemide', 'torsemide'].")
    # only the supported columns hold values: here every text column, so not labs.id; nor an unknown table
    assert call(tools, "value_similarity_search", table="labs", column="id", value="ABC") == (
        "No matches found in labs.id for 'abc'.")
    assert call(tools, "value_similarity_search", table="nope", column="x", value="y") == (
        "No matches found in nope.x for 'y'.")


def test_the_synonym_table_is_off_unless_asked_for(folder):
    # the chatqa instructions are written from the lay-term table: by default the search does not know it
    with DatabaseTools(folder / "ehr.duckdb") as toolbox:
        plain = call(toolbox, "value_similarity_search", table="drugs", column="name", value="Lasix", k=1)
        assert plain != "I found one close match in drugs.name: 'furosemide'." and toolbox.value_search == "lexical"
    with DatabaseTools(folder / "ehr.duckdb", similarity=ValueSimilarity(synonyms=CURATED)) as toolbox:
        assert call(toolbox, "value_similarity_search", table="drugs", column="name", value="Lasix", k=1) == (
            "I found one close match in drugs.name: 'furosemide'.")
        assert toolbox.value_search == "lexical+synonyms"


MIMIC_SIMILARITY_DESCRIPTION = (  # src/envs/mimic_iv_star/tools/value_similarity_search.py
    "Perform a semantic similarity search (embedding-based) to find up to k values similar to a given value in a "
    "specified column. Supported columns: hospitaladmissions: ['admissiontype', 'admitsource', "
    "'dischargedestination'], diagnosiscodes: ['description'], procedurecodes: ['description'], medicationorders: "
    "['medicationname'], clinicalitemtypes: ['itemname'], labtesttypes: ['itemname'], microbiologyresults: "
    "['specimentype', 'testname', 'organismname']")


def test_a_renamed_mimic_database_gets_the_published_supported_columns(tmp_path):
    path = tmp_path / "renamed.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("create table hospitaladmissions (admissiontype varchar, admitsource varchar, "
                    "dischargedestination varchar, insurancetype varchar)")
        con.execute("insert into hospitaladmissions values ('ew emer.', 'emergency room', 'home', 'medicare')")
        for table, columns in {"diagnosiscodes": "description", "procedurecodes": "description",
                               "medicationorders": "medicationname", "clinicalitemtypes": "itemname",
                               "labtesttypes": "itemname",
                               "microbiologyresults": "specimentype, testname, organismname"}.items():
            con.execute(f"create table {table} ({', '.join(f'{c.strip()} varchar' for c in columns.split(','))})")
    embedder = FakeEmbedder()
    with DatabaseTools(path, similarity=ValueSimilarity(embedder=embedder)) as toolbox:
        [spec] = [spec for spec in toolbox.specs if spec.name == "value_similarity_search"]
        assert spec.description == MIMIC_SIMILARITY_DESCRIPTION and toolbox.value_search == "embedding"
        # a column the published index leaves out has no values to match
        assert call(toolbox, "value_similarity_search", table="hospitaladmissions", column="insurancetype",
                    value="medicare") == "No matches found in hospitaladmissions.insurancetype for 'medicare'."
        assert call(toolbox, "value_similarity_search", table="hospitaladmissions", column="admitsource",
                    value="ER") == "I found one close match in hospitaladmissions.admitsource: 'emergency room'."
    assert embedder.calls == [["er", "emergency room"]]  # the value lower-cased, as published


# --- web search ------------------------------------------------------------------------------------------------------

class FakeSearch:
    name = "fake"

    def __init__(self, results: list[WebResult] | None = None, error: str | None = None):
        self.results, self.error, self.queries = results or [], error, []

    def search(self, query: str) -> list[WebResult]:
        self.queries.append(query)
        if self.error:
            raise WebSearchError(self.error)
        return self.results


def test_web_search_is_offered_only_with_a_provider_and_answers_a_json_list(folder):
    results = [WebResult(f"result {i}", f"title {i}", f"http://example.org/{i}") for i in range(12)]
    results[0] = WebResult("β-blockers lower the heart rate")
    search = FakeSearch(results)
    with DatabaseTools(folder / "ehr.duckdb", web_search=search) as toolbox:
        spec = toolbox.specs[-1]
        # src/envs/mimic_iv_star/tools/web_search.py
        assert (spec.name, spec.description) == ("web_search", "Perform a web search to obtain external knowledge.")
        assert spec.parameters == {"type": "object", "properties": {"query": {
            "type": "string", "description": "The search query."}}, "required": ["query"]}
        text = call(toolbox, "web_search", query="what does metoprolol do")
        # published: json.dumps([contents], ensure_ascii=False, indent=2) of at most 10 results
        assert text == json.dumps(["β-blockers lower the heart rate", *(f"result {i}" for i in range(1, 10))],
                                  ensure_ascii=False, indent=2)
        assert text.startswith('[\n  "β-blockers') and search.queries == ["what does metoprolol do"]
        assert toolbox.web_search_name == "fake"
    with DatabaseTools(folder / "ehr.duckdb", web_search=FakeSearch(error="HTTP 503")) as toolbox:
        assert call(toolbox, "web_search", query="x") == "Error: web search failed: HTTP 503"
        assert call(toolbox, "web_search", query=" ") == "Error: query must be a non-empty search query"
    with DatabaseTools(folder / "ehr.duckdb") as toolbox:
        assert "web_search" not in [spec.name for spec in toolbox.specs]
        assert call(toolbox, "web_search", query="x").startswith("Error: there is no tool named 'web_search'")


def test_web_search_providers_are_chosen_by_name_or_url():
    assert check_provider_spec(None) is None and check_provider_spec(" disabled ") is None
    assert provider_for(None) is None and provider_for("disabled") is None
    http = provider_for("https://user:pw@search.local:8443/v1/search?key=secret", timeout_s=5)
    assert isinstance(http, HttpSearchProvider) and http.timeout_s == 5
    assert http.name == "http:https://search.local:8443/v1/search"  # no credentials, no query string
    with pytest.raises(ValueError, match=r"web search provider 'tavily': expected disabled, the http\(s\) URL of a "
                                         r"search endpoint, or a registered provider name"):
        check_provider_spec("tavily")
    register_provider("fake_for_test", lambda timeout_s: FakeSearch())
    assert provider_for("fake_for_test").name == "fake"
    with pytest.raises(ValueError, match="must be an identifier"):
        register_provider("disabled", lambda timeout_s: FakeSearch())


def test_a_subset_of_tools_can_be_offered(folder):
    with DatabaseTools(folder / "ehr.duckdb", tools=("table_search", "column_search", "sql_execute")) as toolbox:
        assert [spec.name for spec in toolbox.specs] == ["table_search", "column_search", "sql_execute"]
        assert toolbox.value_search is None
        assert call(toolbox, "value_substring_search", table="labs", column="label", value="x").startswith(
            "Error: there is no tool named 'value_substring_search'; the tools are: table_search, column_search, "
            "sql_execute")
    with pytest.raises(ValueError, match="unknown database tool"):
        DatabaseTools(folder / "ehr.duckdb", tools=("web_search",))  # web_search comes with a provider only


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
    ranked = ValueSimilarity().rank("furosemde", ["aspirin", "torsemide", "furosemide"], k=2)
    assert ranked[0] == ("furosemide", pytest.approx(0.9474, abs=1e-4))
    assert ranked[1][0] == "torsemide"


def test_scores_order_same_value_then_all_words_then_ties_by_closeness_and_value():
    similarity = ValueSimilarity()
    assert similarity.rank("Aspirin", ["aspirin"], k=1) == [("aspirin", 1.0)]
    # both hold every word of the query (0.95); the closer whole string (ratio 2*12/31 = 0.77 against 2*12/36 =
    # 0.67) comes first although value order says otherwise
    ranked = similarity.rank("hypertension", ["accelerated hypertension", "benign hypertension"], k=2)
    assert ranked == [("benign hypertension", 0.95), ("accelerated hypertension", 0.95)]
    # equal on everything: value order
    assert similarity.rank("x", ["b x", "a x"], k=2) == [("a x", 0.95), ("b x", 0.95)]
    assert similarity.rank("x", [], k=3) == [] and similarity.rank("x", ["x"], k=0) == []


def test_the_modes_are_named_and_lexical_is_the_default():
    assert ValueSimilarity().mode == "lexical" and ValueSimilarity().synonyms is None
    assert ValueSimilarity(synonyms=CURATED).mode == "lexical+synonyms"
    assert ValueSimilarity(embedder=FakeEmbedder()).mode == "embedding"
    assert ValueSimilarity(synonyms=CURATED, embedder=FakeEmbedder()).mode == "embedding+synonyms"


def test_synonyms_score_one_in_both_drug_directions():
    similarity = ValueSimilarity(synonyms=CURATED)
    ranked = similarity.rank("High Potassium", ["potassium", "hyperpotassemia", "hypopotassemia"], k=3)
    assert ranked[0] == ("hyperpotassemia", 1.0)
    assert all(score < 1.0 for _, score in ranked[1:])
    assert similarity.synonym_hits("high potassium", ["HYPERKALEMIA", "potassium"]) == {"HYPERKALEMIA"}
    assert similarity.rank("lasix", ["furosemide", "lasix 40mg"], k=1) == [("furosemide", 1.0)]
    assert similarity.rank("furosemide", ["Lasix", "aspirin"], k=1) == [("Lasix", 1.0)]
    without = ValueSimilarity().rank("high potassium", ["hyperpotassemia"], k=1)
    assert without[0][1] < 0.9


class FakeEmbedder:
    """Two-dimensional vectors by hand: 'heart attack' and 'myocardial infarction' point the same way."""

    provider, model = "fake", "fake"
    vectors = {"heart attack": [1.0, 0.0], "myocardial infarction": [2.0, 0.0], "heart rate": [0.8, 0.6],
               "aspirin": [0.0, 1.0], "er": [1.0, 1.0], "emergency room": [1.0, 1.0]}

    def __init__(self):
        self.calls: list[list[str]] = []

    def embed(self, texts: list[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        return [self.vectors[text] for text in texts]


def test_an_embedder_ranks_by_cosine_alone_and_caches_candidates():
    candidates = ["heart rate", "myocardial infarction", "aspirin"]
    lexical = ValueSimilarity().rank("heart attack", candidates, k=3)
    assert lexical[0][0] == "heart rate"  # 'heart rate' is 0.7273 lexically (ratio 2*8/22)
    embedder = FakeEmbedder()
    similarity = ValueSimilarity(embedder=embedder)
    # the published tool is embedding-based: cosine 1.0, 0.8 (0.8*1 + 0.6*0 over 1*1) and 0.0, lexical ignored
    assert similarity.rank("heart attack", candidates, k=3) == [
        ("myocardial infarction", 1.0), ("heart rate", 0.8), ("aspirin", 0.0)]
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


@pytest.mark.slow  # waits out a timeout
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
        assert "labresults" in call(toolbox, "table_search").split(", ")
        [spec] = [spec for spec in toolbox.specs if spec.name == "value_similarity_search"]
        assert spec.description.endswith(MIMIC_SIMILARITY_DESCRIPTION.split("Supported columns: ")[1])
        assert call(toolbox, "value_similarity_search", table="medicationorders", column="medicationname",
                    value="Lasix", k=3).startswith("I found close matches in medicationorders.medicationname: [")
    with DatabaseTools(database, similarity=ValueSimilarity(synonyms=CURATED)) as toolbox:
        assert call(toolbox, "value_similarity_search", table="medicationorders", column="medicationname",
                    value="Lasix", k=3).startswith("I found close matches in medicationorders.medicationname: "
                                                   "['furosemide', ")
    with FhirTools(BUILD / "fhir" / "resources.duckdb") as toolbox:
        patient = toolbox.index.search(parse_search("Patient", [("_count", "1")])).ids[0]
        text = call(toolbox, "get_resources_by_patient", resource_type="Encounter", patient_id=patient)
        assert text.startswith(f"Encounter resources of Patient {patient}: all ")
        assert toolbox.retrieved_ids
