"""The FHIR server as clients see it: a real uvicorn server on a free port over a hand-made resources.duckdb,
queried with plain HTTP (httpx) and with a FHIR client library (fhirpy), plus the CLI's refusal of a build
without FHIR resources."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import parse_qsl, urlsplit

import httpx
import pytest
from fhirpy import SyncFHIRClient
from fhirpy.base.exceptions import OperationOutcome, ResourceNotFound
from typer.testing import CliRunner

from ehrbench.cli import app as cli
from ehrbench.fhir.search_params import MAX_INTEGER, MAX_REPEATS, MAX_VALUES
from ehrbench.fhir.server import create_app
from tests.fhir_fakes import serving, write_resources_db

from ..unit.test_fhir_search import LAB, sample_resources

pytestmark = pytest.mark.integration

EXTRA = 237  # more Observations than a few pages hold, all at one time: pages must not skip or repeat ties
N_OBSERVATIONS = 8 + EXTRA
CHART_CODE = "220045"  # obs-b2's and the extras'


@pytest.fixture(scope="module")
def base_url(tmp_path_factory):
    database = write_resources_db(tmp_path_factory.mktemp("build") / "fhir" / "resources.duckdb",
                                  sample_resources(extra_observations=EXTRA))
    with serving(create_app(database)) as url:
        yield url


@pytest.fixture
def http(base_url):
    with httpx.Client(base_url=base_url, timeout=30) as client:
        yield client


def _issue(response: httpx.Response) -> dict:
    assert response.headers["content-type"].startswith("application/fhir+json")
    body = response.json()
    assert body["resourceType"] == "OperationOutcome"
    assert body["issue"][0]["severity"] == "error"
    return body["issue"][0]


def _all_pages(http: httpx.Client, first: str) -> tuple[list[str], list[dict]]:
    """Every entry id from following `next` links, and the bundles."""
    bundles, url = [], first
    while url:
        response = http.get(url)
        assert response.status_code == 200, response.text
        bundles.append(response.json())
        url = next((link["url"] for link in bundles[-1]["link"] if link["relation"] == "next"), None)
    return [e["resource"]["id"] for b in bundles for e in b.get("entry", [])], bundles


def test_metadata_is_an_r4_capability_statement_of_the_builds_types(http):
    response = http.get("/metadata")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/fhir+json")
    statement = response.json()
    assert (statement["resourceType"], statement["fhirVersion"], statement["status"], statement["kind"]) == (
        "CapabilityStatement", "4.0.1", "active", "instance")
    assert statement["format"] == ["json"]
    (rest,) = statement["rest"]
    assert rest["mode"] == "server"
    resources = {r["type"]: r for r in rest["resource"]}
    assert sorted(resources) == ["Condition", "Encounter", "Medication", "MedicationRequest", "Observation",
                                 "Patient"]
    assert [i["code"] for i in resources["Observation"]["interaction"]] == ["read", "search-type"]
    assert {p["name"] for p in resources["Observation"]["searchParam"]} == {
        "patient", "subject", "code", "date", "_id", "_count"}
    assert {p["name"] for p in resources["Patient"]["searchParam"]} == {"_id", "_count"}


def test_read_returns_the_resource_and_unknown_ids_or_types_are_404(http):
    response = http.get("/Observation/obs-a5")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/fhir+json")
    assert response.json()["code"]["coding"][1]["code"] == "2823-3"
    missing = http.get("/Observation/nope")
    assert missing.status_code == 404
    issue = _issue(missing)
    assert issue["code"] == "not-found" and "Observation/nope" in issue["diagnostics"]
    unknown = http.get("/Spaceship/x")
    assert unknown.status_code == 404 and "Spaceship" in _issue(unknown)["diagnostics"]
    assert http.get("/Spaceship").status_code == 404
    assert http.get("/Patient/pat-a/_history").status_code == 404


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH"])
def test_writes_are_405(http, method):
    response = http.request(method, "/Patient/pat-a", json={"resourceType": "Patient", "id": "pat-a"})
    assert response.status_code == 405
    assert _issue(response)["code"] == "not-supported"
    assert http.request(method, "/Patient").status_code == 405


def test_bad_parameters_and_formats_are_400_naming_them(http):
    unknown = http.get("/Observation", params={"name": "x"})
    assert unknown.status_code == 400 and "'name'" in _issue(unknown)["diagnostics"]
    fmt = http.get("/Observation", params={"_format": "xml"})
    assert fmt.status_code == 400 and "_format 'xml'" in _issue(fmt)["diagnostics"]
    assert http.get("/Patient/pat-a", params={"_format": "application/fhir+xml"}).status_code == 400
    date = http.get("/Observation", params={"date": "sa2180"})
    assert date.status_code == 400 and "prefix 'sa'" in _issue(date)["diagnostics"]
    assert http.get("/Observation", params={"_count": "many"}).status_code == 400
    for accepted in ("json", "application/fhir+json", "application/json"):
        assert http.get("/Patient/pat-a", params={"_format": accepted}).status_code == 200
        assert http.get("/Patient", params={"_format": accepted}).status_code == 200


def test_out_of_range_numbers_and_oversized_searches_are_400_naming_the_bound(http):
    offset = http.get("/Observation", params={"_offset": "99999999999999999999999"})
    assert offset.status_code == 400
    assert _issue(offset) == {"severity": "error", "code": "invalid", "diagnostics": (
        f"invalid _offset '99999999999999999999999': expected an integer from 0 to {MAX_INTEGER}")}
    count = http.get("/Observation", params={"_count": "-3"})
    assert count.status_code == 400 and "invalid _count '-3'" in _issue(count)["diagnostics"]
    codes = http.get("/Observation", params={"code": ",".join(str(n) for n in range(MAX_VALUES + 1))})
    assert codes.status_code == 400
    assert _issue(codes)["diagnostics"].startswith(f"too many code values: {MAX_VALUES + 1}; at most {MAX_VALUES}")
    dates = http.get("/Observation", params=[("date", "ge2180")] * (MAX_REPEATS + 1))
    assert dates.status_code == 400
    assert _issue(dates)["diagnostics"].startswith(f"too many date parameters: {MAX_REPEATS + 1}; at most")
    last_page = http.get("/Observation", params={"_offset": str(MAX_INTEGER)}).json()  # in range: past the end
    assert last_page["total"] == N_OBSERVATIONS and "entry" not in last_page


def test_search_bundle_with_a_date_in_another_offset(http, base_url):
    # 06:00+02:00 is 00:00 at the builds' -04:00; httpx percent-encodes the '+'
    bundle = http.get("/Observation", params={"date": "ge2180-07-23T06:00:00+02:00", "patient": "Patient/pat-a"}).json()
    assert [e["resource"]["id"] for e in bundle["entry"]] == ["obs-a2", "obs-a3", "obs-a4", "obs-a5"]
    # typed by hand, the '+' arrives as a space: still read as the offset
    assert http.get("/Observation?patient=pat-a&date=ge2180-07-23T06:00:00+02:00").json()["total"] == 4
    assert bundle["type"] == "searchset" and bundle["total"] == 4
    entry = bundle["entry"][0]
    assert entry["fullUrl"] == f"{base_url}/Observation/obs-a2"
    assert entry["search"] == {"mode": "match"}
    assert [link["relation"] for link in bundle["link"]] == ["self"]


def test_paging_by_next_links_returns_every_match_once(http, base_url):
    everything = http.get("/Observation", params={"_count": "1000"}).json()
    assert everything["total"] == len(everything["entry"]) == N_OBSERVATIONS
    ids, bundles = _all_pages(http, "/Observation?_count=17")
    assert len(bundles) == -(-N_OBSERVATIONS // 17)
    assert ids == [e["resource"]["id"] for e in everything["entry"]]
    assert len(set(ids)) == N_OBSERVATIONS
    assert {b["total"] for b in bundles} == {N_OBSERVATIONS}
    # next links are absolute, on this server, and carry the search's own parameters
    ids, bundles = _all_pages(http, f"/Observation?patient=pat-b&code={CHART_CODE}&_count=50")
    assert len(ids) == len(set(ids)) == EXTRA + 1 == bundles[0]["total"]
    next_url = next(link["url"] for link in bundles[0]["link"] if link["relation"] == "next")
    assert next_url.startswith(f"{base_url}/Observation?")
    assert dict(parse_qsl(urlsplit(next_url).query)) == {"patient": "pat-b", "code": CHART_CODE, "_count": "50",
                                                        "_offset": "50"}


def test_count_zero_gives_only_the_total_and_large_counts_are_capped(http):
    bundle = http.get("/Observation", params={"_count": "0"}).json()
    assert bundle["total"] == N_OBSERVATIONS and "entry" not in bundle  # FHIR JSON has no empty arrays
    capped = http.get("/Observation", params={"_count": "100000"}).json()
    assert len(capped["entry"]) == N_OBSERVATIONS  # fewer than the cap of 1000
    assert "_count=1000" in capped["link"][0]["url"]


def test_concurrent_searches_answer_as_sequential_ones(http, base_url):
    queries = [{"patient": p, "_count": str(c)} for p in ("pat-a", "pat-b") for c in (1, 7, 50)] * 4
    expected = [http.get("/Observation", params=q).json() for q in queries]
    with ThreadPoolExecutor(8) as pool, httpx.Client(base_url=base_url, timeout=30) as client:
        answers = list(pool.map(lambda q: client.get("/Observation", params=q).json(), queries))
    assert answers == expected


@pytest.fixture
def fhir(base_url) -> SyncFHIRClient:
    return SyncFHIRClient(base_url)


def test_fhirpy_reads_and_searches(fhir, http):
    patient = fhir.reference("Patient", "pat-a").to_resource()
    assert patient.resourceType == "Patient" and patient["birthDate"] == "2100-01-01"
    assert fhir.resources("Patient").search(_id="pat-b").get()["gender"] == "male"
    with pytest.raises(ResourceNotFound):
        fhir.reference("Patient", "nobody").to_resource()
    found = fhir.resources("Observation").search(patient="pat-a", date__ge="2180-07-23").fetch_all()
    assert [o.id for o in found] == ["obs-a2", "obs-a3", "obs-a4", "obs-a5"]
    coded = fhir.resources("Observation").search(code=f"{LAB}|50912", date__lt="2180-07-24").fetch()
    assert [o.id for o in coded] == ["obs-a1", "obs-0b", "obs-a2", "obs-b1"]
    with pytest.raises(OperationOutcome, match="name"):
        fhir.resources("Observation").search(name="x").fetch()


def test_fhirpy_paging_matches_the_unpaged_search(fhir, http):
    unpaged = http.get("/Observation", params={"patient": "Patient/pat-b", "date": "ge2180-07-23",
                                               "_count": "1000"}).json()
    paged = fhir.resources("Observation").search(patient="Patient/pat-b", date__ge="2180-07-23").limit(10).fetch_all()
    assert [o.id for o in paged] == [e["resource"]["id"] for e in unpaged["entry"]]
    assert len(paged) == unpaged["total"] == EXTRA + 2  # obs-0b, obs-b1 and the extras
    assert fhir.resources("Observation").search(patient="pat-b").limit(1).first().id == "obs-b2"
    assert fhir.resources("Observation").search(patient="Patient/pat-b", date__ge="2180-07-23").count() == EXTRA + 2


def test_fhir_agentbench_query_forms(http, fhir):
    """What FHIR-AgentBench's client sends: `?patient=` followed over every page, `?id=` (read as `_id`), and a
    parameter the type lacks, refused strictly and ignored under `Prefer: handling=lenient`."""
    ids, bundles = _all_pages(http, "/Observation?patient=pat-b")
    assert len(bundles) > 1 and len(ids) == len(set(ids)) == EXTRA + 3
    assert [e["resource"]["id"] for e in http.get("/Patient?id=pat-b").json()["entry"]] == ["pat-b"]
    assert [p.id for p in fhir.resources("Patient").search(id="pat-a").fetch()] == ["pat-a"]
    assert http.get("/Medication?patient=pat-a").status_code == 400
    lenient = http.get("/Medication?patient=pat-a", headers={"Prefer": "handling=lenient"})
    assert lenient.status_code == 200 and [e["resource"]["id"] for e in lenient.json()["entry"]] == ["med-1"]


def test_fhir_agentbench_tools_answer_the_same_over_http_as_in_process(base_url, tmp_path_factory):
    """The published designs' tools against `ehrbench fhir serve` over HTTP and against the in-process index give
    the same dicts (every page of a patient's Observations, a resource by id, one page of a query)."""
    from ehrbench.agents.tools.fhir_agentbench import HttpSource, IndexSource, PublishedFhirTools
    from ehrbench.fhir.search import SearchIndex

    database = write_resources_db(tmp_path_factory.mktemp("again") / "resources.duckdb",
                                  sample_resources(extra_observations=EXTRA))
    calls = [("get_resources_by_patient_fhir_id", {"resource_type": "Observation", "patient_fhir_id": "pat-b"}),
             ("get_resources_by_patient_fhir_id", {"resource_type": "Medication", "patient_fhir_id": "pat-b"}),
             ("get_resources_by_resource_id", {"resource_type": "Encounter", "resource_id": "enc-a2"}),
             ("fhir_request_get", {"query_string": "Observation?patient=pat-b&_count=5"}),
             ("fhir_request_get", {"query_string": "Nothing?patient=pat-b"})]
    index = SearchIndex(database)
    try:
        local = PublishedFhirTools(IndexSource(index), isolation="unsafe: no code runs")
        expected = [local.run(name, args).output for name, args in calls]
    finally:
        index.close()
    source = HttpSource(base_url)
    try:
        remote = PublishedFhirTools(source, isolation="unsafe: no code runs")
        got = [remote.run(name, args).output for name, args in calls]
    finally:
        source.close()
    assert got[:4] == expected[:4]
    assert len(got[0]["Observation"]) == EXTRA + 3 and "meta" not in got[0]["Observation"][0]
    assert [m["id"] for m in got[1]["Medication"]] == ["med-1"]  # no patient on a Medication: every one
    assert len(got[3]["Observation"]) == 5
    assert set(got[4]) == set(expected[4]) == {"error"} and got[4]["error"].startswith("404 Client Error")
    assert remote.retrieved_ids()["Observation"] == [o["id"] for o in got[3]["Observation"]]  # the last fetch


def test_cli_refuses_a_build_without_fhir_resources(tmp_path):
    build = tmp_path / "20260101T000000Z"
    build.mkdir()
    result = CliRunner().invoke(cli, ["fhir", "serve", "--build", str(build)])
    assert result.exit_code == 1
    assert f"{build}" in result.stderr and "fhir/resources.duckdb" in result.stderr
    result = CliRunner().invoke(cli, ["fhir", "serve", "--data-dir", str(tmp_path), "--build", "nope"])
    assert result.exit_code == 1 and "no build folder" in result.stderr


def test_a_folder_of_ndjson_is_served_like_a_build(tmp_path):
    """`ehrbench fhir serve --ndjson DIR`'s store: MIMIC-IV on FHIR's layout (a file per type, gzipped or not) loads
    into the resources table, with each resource's patient from its subject or patient reference; bad input is named."""
    import gzip
    import json

    from ehrbench.errors import ConfigError
    from ehrbench.fhir.ndjson_store import load_ndjson

    resources = sample_resources(extra_observations=0)
    folder = tmp_path / "fhir"
    folder.mkdir()
    by_type: dict[str, list[dict]] = {}
    for resource in resources:
        by_type.setdefault(resource["resourceType"], []).append(resource)
    for kind, items in by_type.items():
        lines = "".join(json.dumps(r) + "\n" for r in items)
        if kind == "Observation":
            (folder / f"Mimic{kind}.ndjson.gz").write_bytes(gzip.compress(lines.encode()))
        else:
            (folder / f"Mimic{kind}.ndjson").write_text(lines)
    counts = load_ndjson(folder, tmp_path / "resources.duckdb")
    assert counts == {kind: len(items) for kind, items in by_type.items()}
    with serving(create_app(tmp_path / "resources.duckdb")) as url, httpx.Client(base_url=url) as http:
        found = http.get("/Observation", params={"patient": "pat-a", "_count": "1000"}).json()
        expected = [r["id"] for r in resources if r["resourceType"] == "Observation"
                    and r.get("subject", {}).get("reference") == "Patient/pat-a"]
        assert sorted(e["resource"]["id"] for e in found["entry"]) == sorted(expected)
    with pytest.raises(ConfigError, match="no \\*.ndjson"):
        load_ndjson(tmp_path / "empty", tmp_path / "other.duckdb")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "x.ndjson").write_text('{"no": "id"}\n')
    with pytest.raises(ConfigError, match="no id or resourceType"):
        load_ndjson(tmp_path / "bad", tmp_path / "bad.duckdb")


def test_ehrbench_fhir_tools_answer_the_same_over_http_as_in_process(base_url, tmp_path_factory):
    """ehrbench's own FHIR tools (retriever, search) with `fhir_base_url`: the HttpIndex over `ehrbench fhir serve`
    gives the same tool results and retrieved ids as the in-process index, paging included."""
    from ehrbench.agents.tools.fhir import FhirTools
    from ehrbench.errors import ConfigError
    from ehrbench.fhir.http_index import HttpIndex
    from ehrbench.fhir.search import SearchIndex
    from ehrbench.llm.tool_chat import ToolCall

    database = write_resources_db(tmp_path_factory.mktemp("tools") / "resources.duckdb",
                                  sample_resources(extra_observations=EXTRA))
    calls = [("get_resources_by_patient", {"resource_type": "Observation", "patient_id": "pat-b"}),
             ("get_resource", {"resource_type": "Encounter", "id": "enc-a2"}),
             ("get_resource", {"resource_type": "Encounter", "id": "nobody"}),
             ("fhir_search", {"query_string": "Observation?patient=pat-b&date=ge2180-07-23&_count=7&_offset=3"}),
             ("fhir_search", {"query_string": "Observation?name=x"})]

    def results(index) -> tuple[list[str], list[str]]:
        tools = FhirTools(database, index=index, variant="code", isolation="unsafe: no code runs")
        texts = [tools.call(ToolCall(f"c{i}", name, args, json.dumps(args))) for i, (name, args) in
                 enumerate(calls)]
        return texts, tools.retrieved_ids

    local = SearchIndex(database)
    try:
        expected = results(local)
    finally:
        local.close()
    remote = HttpIndex(base_url)
    try:
        got = results(remote)
    finally:
        remote.close()
    assert got[1] == expected[1] and len(got[1]) == EXTRA + 3 + 1
    assert got[0][:4] == expected[0][:4]
    assert "unknown search parameter 'name'" in got[0][4] and "unknown search parameter 'name'" in expected[0][4]
    with pytest.raises(ConfigError, match="no FHIR server there"):
        HttpIndex("http://127.0.0.1:9")
