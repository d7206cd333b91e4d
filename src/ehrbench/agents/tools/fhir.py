"""FHIR-AgentBench's tools (docs/benchmarks.md#agent-tools) over one build's `fhir/resources.duckdb`, read through the
in-memory SearchIndex: nothing else of the build (questions, gold, hidden files) is ever opened.

One FhirTools serves one trial: `retrieved_ids` lists every resource a tool returned in it (first-seen order), for
retrieval precision and recall, and execute_python sees exactly those resources as `resources.json`. Share one
SearchIndex across trials (`index=`): building it reads every resource once.
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import parse_qsl, urlencode

from ehrbench.agents.sandbox import run_python
from ehrbench.agents.tools.base import DEFAULT_MAX_CHARS, Tool, ToolError, dispatch, truncated
from ehrbench.fhir.search import SearchIndex
from ehrbench.fhir.search_params import WITHOUT_PATIENT, SearchError, parse_search
from ehrbench.fhir.search_params import query_string as page_query_string
from ehrbench.llm.tool_chat import ToolCall, ToolSpec
from ehrbench.metrics.retrieval import ids_by_type

# The most resources one get_resources_by_patient call returns (a patient's Observations can run to thousands).
MAX_PATIENT_RESOURCES = 5000
RESOURCES_FILE = "resources.json"

_TYPE = {"type": "string", "description": "a FHIR resource type, e.g. Patient, Encounter, Observation, Condition, "
                                          "Procedure, MedicationRequest, Medication"}
SPECS = {
    "get_resources_by_patient": ToolSpec(
        "get_resources_by_patient",
        "Return all resources of one type that belong to a patient, one JSON resource per line.",
        {"type": "object", "properties": {
            "resource_type": _TYPE,
            "patient_id": {"type": "string", "description": "the Patient resource's FHIR id"}},
         "required": ["resource_type", "patient_id"]}),
    "get_resource": ToolSpec(
        "get_resource", "Return one resource by its type and FHIR id (e.g. the target of a reference "
                        "'Medication/<id>').",
        {"type": "object", "properties": {"resource_type": _TYPE,
                                          "id": {"type": "string", "description": "the resource's FHIR id"}},
         "required": ["resource_type", "id"]}),
    "fhir_search": ToolSpec(
        "fhir_search",
        "Run a FHIR search and return the total, the page's ids and resources, and the next page's query. Format: "
        "'<Type>?<param>=<value>&...'. Parameters: patient=<Patient id>, code=<code> or <system>|<code> (comma = "
        "OR), date=<prefix><date> with prefixes eq, ne, gt, lt, ge, le (repeat date= to AND), _id, _count "
        "(page size, default 50), _offset. Example: 'Observation?patient=<id>&code=50912&date=ge2180-07-01'.",
        {"type": "object", "properties": {"query_string": {"type": "string",
                                                           "description": "<Type>?<search parameters>"}},
         "required": ["query_string"]}),
    "execute_python": ToolSpec(
        "execute_python",
        f"Run Python 3 code (standard library, numpy, pandas; no network, 10 s). The file {RESOURCES_FILE} in the "
        "working directory holds a JSON list of every resource the tools have returned so far in this task. "
        "Print what you want to see.",
        {"type": "object", "properties": {"code": {"type": "string", "description": "the Python program"}},
         "required": ["code"]}),
}
VARIANTS = {
    "retriever": ("get_resources_by_patient", "get_resource"),
    "search": ("fhir_search", "get_resource"),
    "code": ("get_resources_by_patient", "get_resource", "fhir_search", "execute_python"),
}


def _compact(resource_text: str) -> str:
    return json.dumps(json.loads(resource_text), separators=(",", ":"), ensure_ascii=False)


class FhirTools:
    """The FHIR-AgentBench tools (a toolbox: `specs`, `call`) of one `variant` (retriever, search or code). Builds
    its own SearchIndex unless given one; close it (or use a context manager) when it owns it."""

    def __init__(self, resources_db: Path, *, index: SearchIndex | None = None, variant: str = "code",
                 max_chars: int = DEFAULT_MAX_CHARS, python_timeout_s: float = 10, isolation: str | None = None):
        if variant not in VARIANTS:
            raise ValueError(f"unknown FHIR tools variant {variant!r}; the variants are {list(VARIANTS)}")
        self.variant = variant
        self.max_chars = max_chars
        self.python_timeout_s = python_timeout_s
        self.isolation = isolation  # of execute_python (ehrbench.agents.sandbox.isolation); None: bubblewrap
        self._owns_index = index is None
        self.index = index if index is not None else SearchIndex(Path(resources_db))
        runners = {"get_resources_by_patient": self.get_resources_by_patient, "get_resource": self.get_resource,
                   "fhir_search": self.fhir_search, "execute_python": self.execute_python}
        self._tools = {name: Tool(SPECS[name], runners[name]) for name in VARIANTS[variant]}
        self.specs: list[ToolSpec] = [tool.spec for tool in self._tools.values()]
        self.retrieved_ids: list[str] = []
        self._retrieved: dict[tuple[str, str], str] = {}  # (type, id) -> compact JSON, first-seen order

    def __enter__(self) -> FhirTools:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self._owns_index:
            self.index.close()

    def call(self, call: ToolCall) -> str:
        return dispatch(self._tools, call, expected=(SearchError,))

    # --- the tools ---------------------------------------------------------------------------------------------

    def get_resources_by_patient(self, resource_type: str, patient_id: str) -> str:
        resource_type = self._resource_type(resource_type)
        if resource_type in WITHOUT_PATIENT:
            raise ToolError(f"{resource_type} resources do not belong to a patient; read one with get_resource"
                            f"{' or search them with fhir_search' if 'fhir_search' in self._tools else ''}")
        patient_id = self._patient(patient_id)
        query = parse_search(resource_type, [("patient", patient_id)])
        query.count = MAX_PATIENT_RESOURCES
        result = self.index.search(query)
        if not result.ids:
            return f"Patient {patient_id} has no {resource_type} resources."
        lines = self._retrieve(resource_type, result.ids)
        shown = (f"all {result.total}" if result.total == len(result.ids)
                 else f"the first {len(result.ids)} of {result.total}")
        header = f"{resource_type} resources of Patient {patient_id}: {shown}, one per line"
        return truncated("\n".join([header, *lines]), self.max_chars, self._how_to_see_more())

    def get_resource(self, resource_type: str, id: str) -> str:  # `id`: the tool's argument name
        resource_type = self._resource_type(resource_type)
        resource_id = id.strip().removeprefix(f"{resource_type}/")
        text = self.index.read(resource_type, resource_id)
        if text is None:
            raise ToolError(f"{resource_type}/{resource_id} not found; use an id from a tool's result or a "
                            "reference's '<Type>/<id>'")
        (line,) = self._retrieve(resource_type, [resource_id], [text])
        return truncated(line, self.max_chars, self._how_to_see_more())

    def fhir_search(self, query_string: str) -> str:
        resource_type, params = self._parse_query_string(query_string)
        query = parse_search(resource_type, params)
        result = self.index.search(query)
        asked = f"{resource_type}?{urlencode(params)}" if params else resource_type
        if not result.ids:
            page = "" if result.total == 0 else f" (none on this page: _offset {query.offset}, _count {query.count})"
            return f"{asked}: {result.total} matching resources{page}."
        lines = [f"{asked}: {result.total} matching resources; this page (_offset {query.offset}, _count "
                 f"{query.count}) has {len(result.ids)}: {', '.join(result.ids)}"]
        next_offset = query.offset + len(result.ids)
        if next_offset < result.total:
            lines.append(f"next page: {resource_type}?{page_query_string(query, params, next_offset)}")
        lines += self._retrieve(resource_type, result.ids)
        return truncated("\n".join(lines), self.max_chars, "lower _count and page with _offset, or add filters")

    def execute_python(self, code: str) -> str:
        if not code.strip():
            raise ToolError("code is empty; send a Python program that prints its result")
        resources = "[" + ",".join(self._retrieved.values()) + "]"
        result = run_python(code, inputs={RESOURCES_FILE: resources}, timeout_s=self.python_timeout_s,
                            cpu_s=max(1, int(self.python_timeout_s)), isolation=self.isolation)
        lines = [f"exit status {result.exit_status} ({len(self._retrieved)} resources were in {RESOURCES_FILE})"]
        if result.killed_reason:
            lines.append(f"killed: {result.killed_reason}")
        lines += [f"stdout:\n{result.stdout.rstrip()}" if result.stdout.strip() else "stdout: (empty)"]
        if result.stderr.strip():
            lines.append(f"stderr:\n{result.stderr.rstrip()}")
        return truncated("\n".join(lines), self.max_chars, "print less (aggregates, the first rows)")

    def retrieved_by_type(self) -> dict[str, list[str]]:
        """Resource type -> the ids retrieved in this trial, first-seen order."""
        return ids_by_type(self._retrieved)

    # --- helpers -----------------------------------------------------------------------------------------------

    def _retrieve(self, resource_type: str, ids: list[str], texts: list[str] | None = None) -> list[str]:
        """The resources as compact JSON lines, recorded as retrieved in this trial."""
        texts = texts if texts is not None else self.index.resources(resource_type, ids)
        lines = []
        for resource_id, text in zip(ids, texts, strict=True):
            key = (resource_type, resource_id)
            if key not in self._retrieved:
                self._retrieved[key] = _compact(text)
                if resource_id not in self.retrieved_ids:
                    self.retrieved_ids.append(resource_id)
            lines.append(self._retrieved[key])
        return lines

    def _resource_type(self, name: str) -> str:
        if name in self.index.types:
            return name
        matches = [known for known in self.index.types if known.lower() == name.strip().lower()]
        if len(matches) == 1:
            return matches[0]
        raise ToolError(f"unknown resource type {name!r}; this server has: {', '.join(self.index.types)}")

    def _patient(self, patient_id: str) -> str:
        patient_id = patient_id.strip().removeprefix("Patient/")
        if self.index.read("Patient", patient_id) is None:
            raise ToolError(f"no Patient with id {patient_id!r}; patient_id is the Patient resource's FHIR id")
        return patient_id

    def _parse_query_string(self, text: str) -> tuple[str, list[tuple[str, str]]]:
        path, _, query = text.strip().partition("?")
        path = path.strip().strip("/")
        if "://" in path:  # a full URL: its last path segment names the type
            path = path.rsplit("/", 1)[-1]
        if not path or "/" in path:
            raise ToolError(f"query_string must look like '<Type>?<param>=<value>&...', got {text!r}; to read one "
                            "resource by id use get_resource")
        return self._resource_type(path), parse_qsl(query, keep_blank_values=True)

    def _how_to_see_more(self) -> str:
        if "execute_python" in self._tools:
            return f"every resource returned is in {RESOURCES_FILE} for execute_python to filter and count"
        if "fhir_search" in self._tools:
            return "use fhir_search with code/date filters and _count/_offset paging"
        return "read single resources with get_resource"

