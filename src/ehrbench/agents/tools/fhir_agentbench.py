"""FHIR-AgentBench's own tools, as its agents call them (glee4810/FHIR-AgentBench `tools/resource_tools.py`,
`tools/request_tools.py`, `tools/python_executor.py`; docs/benchmarks.md#fhir-agentbench-agent-designs), over a FHIR
server: the build's view in-process (IndexSource) or any FHIR R4 base URL (HttpSource, option `fhir_base_url`). They
send its client's query forms: `<Type>?patient=<id>`, `<Type>?id=<id>` (every page) and the agent's own query string
(one page).

Each tool returns a Python dict, which the agents put into the conversation as `str(dict)` (or as a one-line summary,
in the code designs) and merge into `retrieved` with `dict.update`: a later retrieval of a type replaces the earlier
one. `retrieved` is what the code sees as `retrieved_resources` and what retrieval is scored on.

- `get_resources_by_patient_fhir_id(resource_type, patient_fhir_id)`: every resource of the type for the patient (all
  pages), `text` and `meta` removed; `{type: [resources]}`. Location and Medication have no patient: a lenient store
  ignores the parameter, so all resources of the type come back.
- `get_resources_by_resource_id(resource_type, resource_id)`: the resource with that id, the same way (`id=` is read
  as `_id`).
- `fhir_request_get(query_string)`: one GET of `<Type>?<params>`, its first page only (`_count` default 100),
  `text` and `meta` kept.
- `execute_python_code(code, timeout)`: the code runs with `retrieved_resources` (and json, re, datetime, math,
  statistics) in the sandbox; the result is `{"answer": answer}`, `{"error": "Code executed successfully (no answer
  variable set)"}` or `{"error": "Error executing code: …"}`. What the code prints is not returned.
A failing tool returns `{"error": "<message>"}`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import parse_qsl

import httpx

from ehrbench.agents.sandbox import run_python
from ehrbench.fhir.search import SearchIndex
from ehrbench.fhir.search_params import SearchError, parse_search
from ehrbench.llm.tool_chat import ToolSpec

# The resource types its agents are told about (tools/resource_tools.py supported_types).
SUPPORTED_TYPES = ("Patient", "Encounter", "Condition", "MedicationRequest", "Procedure", "Observation",
                   "MedicationAdministration", "Location", "Specimen", "Medication")
REQUEST_PAGE_SIZE = 100  # a FHIR store's default page size (fhir_request_get sends no _count)
ALL_PAGES = 1_000_000  # the resource tools follow every next link
PYTHON_TIMEOUT_S = 60  # its executor has no time limit; the sandbox must have one (its function default: 60)


def _spec(name: str, description: str, properties: dict, required: list[str]) -> ToolSpec:
    return ToolSpec(name, description, {"type": "object", "properties": properties, "required": required})


SPECS = {  # the published function schemas
    "get_resources_by_patient_fhir_id": _spec(
        "get_resources_by_patient_fhir_id", "Get FHIR resources by patient FHIR ID",
        {"resource_type": {"type": "string", "description": "FHIR resource type"},
         "patient_fhir_id": {"type": "string", "description": "Patient FHIR ID"}},
        ["resource_type", "patient_fhir_id"]),
    "get_resources_by_resource_id": _spec(
        "get_resources_by_resource_id", "Get FHIR resources by resource ID",
        {"resource_type": {"type": "string", "description": "FHIR resource type"},
         "resource_id": {"type": "string", "description": "FHIR resource ID"}},
        ["resource_type", "resource_id"]),
    "fhir_request_get": _spec(
        "fhir_request_get", "FHIR GET request",
        {"query_string": {"type": "string", "description": "FHIR query string"}}, ["query_string"]),
    "execute_python_code": _spec(
        "execute_python_code",
        "Execute Python code with access to retrieved_resources and capture both stdout and answer variable. When "
        "comparing or calculating differences between dates, make sure to set both dates to timezone-naive so the "
        "comparison works without code failure.",
        {"code": {"type": "string", "description": "Python code to execute. Use 'answer' variable to store final "
                                                   "result."},
         "timeout": {"type": "integer", "description": "Timeout in seconds", "default": 30}},
        ["code"]),
}
RETRIEVAL_TOOLS = ("get_resources_by_patient_fhir_id", "get_resources_by_resource_id", "fhir_request_get")

# Runs in the sandbox: the agent's code (request.json's "code") with the retrieved resources, its prints discarded.
_EXECUTOR = r'''
import contextlib, datetime, io, json, math, re, statistics, sys, traceback
request = json.load(open("request.json"))
scope = {"json": json, "re": re, "datetime": datetime, "math": math, "statistics": statistics, "answer": None,
         "retrieved_resources": request["retrieved_resources"]}
try:
    with contextlib.redirect_stdout(io.StringIO()):
        exec(request["code"], scope)
    answer = scope.get("answer")
    output = {"answer": answer} if answer is not None else {
        "error": "Code executed successfully (no answer variable set)"}
except BaseException as exc:
    output = {"error": f"Error executing code: {exc}\n\nFull traceback:\n{traceback.format_exc()}"}
sys.stdout.write("\x00RESULT\x00" + str(output))
'''


@dataclass
class ToolResult:
    """A tool's dict and the text the model is shown (`str` of the dict unless the sandbox printed it)."""
    output: dict
    text: str = ""

    def __post_init__(self) -> None:
        self.text = self.text or str(self.output)


class FhirSourceError(Exception):
    """A GET the FHIR server refused or could not answer; the message is what the published client would say."""


class FhirSource(Protocol):
    def get(self, query: str, *, all_pages: bool) -> list[dict]:
        """The resources of a GET of `<Type>?<params>` (relative to the base URL): its first page, or every page."""
        ...


class IndexSource:
    """The build's view in-process (the fast default): a GET answered by the SearchIndex as `ehrbench fhir serve`
    answers it, with FHIR's lenient handling of parameters a type does not support."""

    def __init__(self, index: SearchIndex):
        self.index = index

    def get(self, query: str, *, all_pages: bool) -> list[dict]:
        path, _, text = query.strip().lstrip("/").partition("?")
        resource_type = path.strip("/")
        if resource_type not in self.index.types:
            raise FhirSourceError(f"404 Client Error: Not Found for url: {resource_type}")
        params = parse_qsl(text, keep_blank_values=True)
        try:
            search = parse_search(resource_type, params, lenient=True)
        except SearchError as exc:
            raise FhirSourceError(f"400 Client Error: {exc}") from None
        if all_pages:
            search.count, search.offset = ALL_PAGES, 0
        elif not any(name == "_count" for name, _ in params):
            search.count = REQUEST_PAGE_SIZE
        result = self.index.search(search)
        return [json.loads(t) for t in self.index.resources(resource_type, result.ids)] if result.ids else []


class HttpSource:
    """Any FHIR R4 server over HTTP, asked as FHIR-AgentBench's client asks (fhir_client.py): GET
    `<base>/<query>`, an HTTP error raised as requests words it, `link` `next` followed for every page. It asks for
    lenient handling, the default of the store FHIR-AgentBench used."""

    def __init__(self, base_url: str, *, timeout_s: float = 60.0, max_pages: int = 10_000):
        self.base_url = base_url.rstrip("/")
        self.max_pages = max_pages
        self.client = httpx.Client(timeout=timeout_s, headers={"Accept": "application/fhir+json",
                                                               "Prefer": "handling=lenient"})

    def get(self, query: str, *, all_pages: bool) -> list[dict]:
        url: str | None = f"{self.base_url}/{query.strip().lstrip('/')}"
        resources: list[dict] = []
        for _ in range(self.max_pages):
            bundle = self._bundle(url)
            resources += [entry["resource"] for entry in bundle.get("entry", []) if "resource" in entry]
            url = next((link.get("url") for link in bundle.get("link", []) if link.get("relation") == "next"), None)
            if not all_pages or not url:
                return resources
        raise FhirSourceError(f"more than {self.max_pages} pages for {query}")

    def _bundle(self, url: str) -> dict:
        try:
            response = self.client.get(url)
        except httpx.HTTPError as exc:
            raise FhirSourceError(f"{type(exc).__name__}: {exc}") from None
        if response.status_code >= 400:
            kind = "Client" if response.status_code < 500 else "Server"
            raise FhirSourceError(f"{response.status_code} {kind} Error: {response.reason_phrase} for url: {url}")
        try:
            return response.json()
        except ValueError:
            raise FhirSourceError(f"not FHIR JSON from {url}") from None

    def close(self) -> None:
        self.client.close()


class PublishedFhirTools:
    """FHIR-AgentBench's tools of one trial over a FHIR source (shared across trials)."""

    def __init__(self, source: FhirSource, *, isolation: str | None = None):
        self.source = source  # the FHIR server: IndexSource (in-process) or HttpSource (any FHIR R4 base URL)
        self.isolation = isolation  # of execute_python_code (ehrbench.agents.sandbox); None: bubblewrap
        self.retrieved: dict[str, object] = {}  # retrieved_resources: type -> resources (or "error" -> message)
        self._runners: dict[str, Callable[..., dict | ToolResult]] = {
            "get_resources_by_patient_fhir_id": self.get_resources_by_patient_fhir_id,
            "get_resources_by_resource_id": self.get_resources_by_resource_id,
            "fhir_request_get": self.fhir_request_get, "execute_python_code": self.execute_python_code}

    def run(self, name: str, arguments: dict) -> ToolResult:
        """Call a tool with the model's arguments; a retrieval tool's output is merged into `retrieved`."""
        runner = self._runners.get(name)
        if runner is None:
            return ToolResult({"error": f"unknown tool {name!r}"})
        try:
            result = runner(**arguments)
        except TypeError as exc:  # arguments the function does not take, as calling it in Python would raise
            result = {"error": str(exc)}
        result = result if isinstance(result, ToolResult) else ToolResult(result)
        if name in RETRIEVAL_TOOLS:
            self.retrieved.update(result.output)
        return result

    def retrieved_ids(self) -> dict[str, list[str]]:
        """Resource type -> the ids of `retrieved`'s resources (its return_resource_ids: lists only)."""
        return {kind: [str(r["id"]) for r in value if isinstance(r, dict) and "id" in r]
                for kind, value in self.retrieved.items() if isinstance(value, list)}

    # --- the tools ---------------------------------------------------------------------------------------------

    def get_resources_by_patient_fhir_id(self, resource_type: str, patient_fhir_id: str) -> dict:
        query = f"{resource_type}?patient={patient_fhir_id}" if patient_fhir_id else str(resource_type)
        return self._get(query, all_pages=True, keep_meta=False)

    def get_resources_by_resource_id(self, resource_type: str, resource_id: str) -> dict:
        query = f"{resource_type}?id={resource_id}" if resource_id else str(resource_type)
        return self._get(query, all_pages=True, keep_meta=False)

    def fhir_request_get(self, query_string: str) -> dict:
        return self._get(str(query_string), all_pages=False, keep_meta=True)

    def execute_python_code(self, code: str, timeout: int = 30) -> ToolResult:
        request = json.dumps({"code": str(code), "retrieved_resources": self.retrieved}, ensure_ascii=False)
        result = run_python(_EXECUTOR, inputs={"request.json": request}, timeout_s=PYTHON_TIMEOUT_S,
                            cpu_s=PYTHON_TIMEOUT_S, isolation=self.isolation)
        marker = "\x00RESULT\x00"
        if marker in result.stdout:  # the executor's dict as Python prints it: the answer may be any object
            printed = result.stdout.split(marker, 1)[1]
            return ToolResult({"printed": printed}, printed)
        reason = result.killed_reason or (result.stderr.strip().splitlines() or ["no output"])[-1]
        return ToolResult({"error": f"Error executing code: {reason}"})

    # --- helpers -----------------------------------------------------------------------------------------------

    def _get(self, query: str, *, all_pages: bool, keep_meta: bool) -> dict:
        """`{type: [resources]}` of a GET of `query` (grouped by resourceType, as its tools do), {} for none."""
        try:
            resources = self.source.get(query, all_pages=all_pages)
        except FhirSourceError as exc:
            return {"error": str(exc)}
        grouped: dict[str, list[dict]] = {}
        for resource in resources:
            if not keep_meta:
                resource = {k: v for k, v in resource.items() if k not in ("text", "meta")}
            grouped.setdefault(resource.get("resourceType", "Unknown"), []).append(resource)
        return grouped
