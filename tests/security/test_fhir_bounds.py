"""Replays of issue 17's unbounded FHIR searches, against a real uvicorn server and the agents' in-process tool:
`_offset=99999999999999999999999` was a 500; 20,000 codes in one search got no answer in 60 s; the agents'
`fhir_search` had no timeout (8,000 dates: 77 s). Each must now be refused at once with a message naming the bound,
or stopped at the search timeout (set low here) with a clear status while the server keeps answering; and no
malformed parameter may draw a 500.

The servers accept long request lines (as uvicorn does with httptools) so that big searches reach the app rather
than being cut by h11's own limit.
"""

from __future__ import annotations

import json
import threading
import time
from http.client import HTTPConnection
from urllib.parse import urlsplit

import httpx
import pytest

from ehrbench.agents.tools import FhirTools
from ehrbench.fhir.search import SearchIndex
from ehrbench.fhir.search_params import MAX_INTEGER, MAX_REPEATS, MAX_VALUES
from ehrbench.fhir.server import create_app
from ehrbench.llm.tool_chat import ToolCall
from tests.bounded import finished_within
from tests.fhir_fakes import serving, slow_down_searches, write_resources_db
from tests.unit.test_fhir_search import sample_resources

pytestmark = pytest.mark.security

TIMEOUT_S = 0.5  # the search timeout of these tests (the default is 30 s)
PROMPT_S = 5.0  # a refusal or a stopped search answers well within this
LONG_LINES = {"h11_max_incomplete_event_size": 1 << 20}


@pytest.fixture(scope="module")
def resources_db(tmp_path_factory):
    return write_resources_db(tmp_path_factory.mktemp("fhir") / "resources.duckdb", sample_resources())


@pytest.fixture(scope="module")
def base_url(resources_db):
    with serving(create_app(resources_db, search_timeout_s=TIMEOUT_S), **LONG_LINES) as url:
        yield url


@pytest.fixture
def http(base_url):
    with httpx.Client(base_url=base_url, timeout=30) as client:
        yield client


@pytest.fixture(scope="module")
def slow_url(resources_db):
    """A server whose every search runs for minutes unless stopped (reads stay fast)."""
    app = create_app(resources_db, search_timeout_s=1.0)  # above a read's few ms even on a busy machine
    slow_down_searches(app.state.index)
    with serving(app, **LONG_LINES) as url:
        yield url


def _diagnostics(response: httpx.Response) -> str:
    assert response.headers["content-type"].startswith("application/fhir+json")
    body = response.json()
    assert body["resourceType"] == "OperationOutcome"
    return body["issue"][0]["diagnostics"]


def _timed_get(client: httpx.Client, path: str, params=None) -> tuple[httpx.Response, float]:
    started = time.perf_counter()
    response = client.get(path, params=params)
    return response, time.perf_counter() - started


def _long_get(base_url: str, path: str) -> tuple[int, dict, float]:
    """(status, JSON body, seconds) of a GET whose URL is longer than httpx sends (64 KiB)."""
    address = urlsplit(base_url)
    connection = HTTPConnection(address.hostname, address.port, timeout=30)
    started = time.perf_counter()
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        assert response.getheader("content-type").startswith("application/fhir+json")
        return response.status, json.loads(response.read()), time.perf_counter() - started
    finally:
        connection.close()


def test_a_huge_offset_is_a_400_naming_the_range(http):
    response, elapsed = _timed_get(http, "/Observation", {"_offset": "99999999999999999999999"})
    assert response.status_code == 400 and elapsed < PROMPT_S
    assert _diagnostics(response) == (
        f"invalid _offset '99999999999999999999999': expected an integer from 0 to {MAX_INTEGER}")


def test_twenty_thousand_codes_are_refused_at_once(base_url):
    status, body, elapsed = _long_get(base_url, f"/Observation?code={','.join(['1'] * 20_000)}")
    assert status == 400 and elapsed < PROMPT_S
    assert body["issue"][0]["diagnostics"] == (f"too many code values: 20,000; at most {MAX_VALUES} per search "
                                               "(comma-separated and repeated together)")
    # longer codes reach the cap on a value's length first
    status, body, elapsed = _long_get(base_url, f"/Observation?code={','.join(map(str, range(50000, 70000)))}")
    assert status == 400 and elapsed < PROMPT_S
    assert body["issue"][0]["diagnostics"] == "code value too long: 119,999 characters; at most 100,000 per value"


def test_eight_thousand_dates_are_refused_at_once_by_the_server_and_the_agents_tool(base_url, resources_db):
    dates = "&".join(["date=ge2180-01-01"] * 8000)
    status, body, elapsed = _long_get(base_url, f"/Observation?{dates}")
    assert status == 400 and elapsed < PROMPT_S
    assert body["issue"][0]["diagnostics"] == (f"too many date parameters: 8,000; at most {MAX_REPEATS} per "
                                               "search (each one is ANDed)")
    with FhirTools(resources_db, variant="search") as tools:
        call = ToolCall("c1", "fhir_search", {"query_string": f"Observation?{dates}"}, "{}")
        text, elapsed = finished_within(20, tools.call, call)
    assert text == f"Error: too many date parameters: 8,000; at most {MAX_REPEATS} per search (each one is ANDed)"
    assert elapsed < PROMPT_S


def test_a_search_past_the_timeout_is_503_while_other_requests_are_answered(slow_url):
    answers: dict[str, tuple[httpx.Response, float]] = {}

    def slow_search() -> None:
        with httpx.Client(base_url=slow_url, timeout=30) as client:
            answers["search"] = _timed_get(client, "/Observation", {"patient": "pat-a"})
            answers["search_done"] = (answers["search"][0], time.perf_counter())

    thread = threading.Thread(target=slow_search, daemon=True)
    thread.start()
    time.sleep(0.2)  # the search is running now
    with httpx.Client(base_url=slow_url, timeout=30) as client:
        read, read_s = _timed_get(client, "/Patient/pat-a")
        read_done = time.perf_counter()
        metadata = client.get("/metadata")
    thread.join(timeout=20)
    assert not thread.is_alive(), "the slow search got no answer in 20 s"
    assert read.status_code == 200 and read.json()["id"] == "pat-a" and read_s < 1.0
    assert metadata.status_code == 200
    assert read_done < answers["search_done"][1]  # answered while the search was still running

    response, elapsed = answers["search"]
    assert response.status_code == 503
    assert response.json()["issue"][0]["code"] == "timeout"
    assert _diagnostics(response).startswith("the search exceeded 1 s and was stopped; narrow the search")
    assert 0.9 < elapsed < PROMPT_S


def test_the_agents_fhir_search_stops_at_its_timeout(resources_db):
    index = SearchIndex(resources_db, timeout_s=TIMEOUT_S)
    slow_down_searches(index)
    try:
        with FhirTools(resources_db, index=index, variant="search") as tools:
            call = ToolCall("c1", "fhir_search", {"query_string": "Observation?patient=pat-a"}, "{}")
            text, elapsed = finished_within(20, tools.call, call)
            assert text == ("Error: the search exceeded 0.5 s and was stopped; narrow the search (patient, code, "
                            "date) or lower _count")
            assert elapsed < PROMPT_S
            assert tools.call(ToolCall("c2", "get_resource", {"resource_type": "Patient", "id": "pat-a"}, "{}"))
    finally:
        index.close()


_LONG = "9" * 30_000
MALFORMED = [
    *[[(name, value)] for name in ("_count", "_offset")
      for value in ("99999999999999999999999", "-1", "-0", "ten", "1e3", "0x10", "\u0663", "1_000", " 5", "+5",
                    "\x00", "%", "\u00fc", _LONG, str(MAX_INTEGER + 1))],
    [("_count", "5"), ("_count", "5")], [("_offset", "1"), ("_offset", "2")],
    *[[("date", value)] for value in ("ge", "eq", "9999-12-31T23:59:59-14:00", "le0001-01-01T00:00:00+14:00",
                                      "\u0662\u0661\u0668\u0660", "2180,2181", "zz2180", "\x00", _LONG,
                                      "ge2180-02-30")],
    [("code", "|")], [("_total", "x")], [("_format", "xml")], [("\u00fc", "1")], [("", "x")], [("code:text", "x")],
    [("code", ",".join(["1"] * (MAX_VALUES + 1)))], [("_id", ",".join(["a"] * (MAX_VALUES + 1)))],
    [("patient", "p")] * (MAX_REPEATS + 1), [("_total", "none")] * 101,
]


def _case(params: list[tuple[str, str]]) -> str:
    return f"{params[0][0]!r}={params[0][1][:12]!r}x{len(params)}"


@pytest.mark.parametrize("params", MALFORMED, ids=_case)
def test_no_malformed_parameter_draws_a_500(http, params):
    response = http.get("/Observation", params=params)
    assert response.status_code == 400, response.text
    assert "Traceback" not in response.text
    assert _diagnostics(response) and len(response.text) < 1000  # long values are cut, not echoed


@pytest.mark.parametrize("params", [
    [("code", ",,,,")], [("_id", ",")], [("patient", "Patient/")], [("code", "\x00")], [("patient", "\u00fc" * 500)],
    [("code", "")] * 3, [("subject", "Group/x")], [("_count", str(MAX_INTEGER)), ("_offset", str(MAX_INTEGER))],
])
def test_odd_but_valid_parameters_are_answered(http, params):
    response = http.get("/Observation", params=params)
    assert response.status_code == 200, response.text
    assert response.json()["resourceType"] == "Bundle"
