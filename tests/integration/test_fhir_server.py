"""The FHIR server as clients see it: a real uvicorn server on a free port over a hand-made resources.duckdb,
queried with plain HTTP (httpx) and with a FHIR client library (fhirpy), plus the CLI's refusal of a build
without FHIR resources."""

from __future__ import annotations

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


def test_cli_refuses_a_build_without_fhir_resources(tmp_path):
    build = tmp_path / "20260101T000000Z"
    build.mkdir()
    result = CliRunner().invoke(cli, ["fhir", "serve", "--build", str(build)])
    assert result.exit_code == 1
    assert f"{build}" in result.stderr and "fhir/resources.duckdb" in result.stderr
    result = CliRunner().invoke(cli, ["fhir", "serve", "--data-dir", str(tmp_path), "--build", "nope"])
    assert result.exit_code == 1 and "no build folder" in result.stderr
