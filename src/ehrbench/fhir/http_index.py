"""The SearchIndex interface (`types`, `read`, `search`, `resources`) over any FHIR R4 server's REST API, so that
ehrbench's own FHIR tools (`ehrbench.agents.tools.fhir`) can ask a remote server — `ehrbench fhir serve`, HAPI, a
cloud FHIR store — as they ask the build's view in-process (agent option `fhir_base_url`).

A search sends the parameters the agent gave (`SearchQuery.params`) with `_count` (and `_offset` when paging), then
follows `next` links until it holds the page asked for; the resources it returned are kept for `resources()`. A
refusal becomes a SearchError with the server's OperationOutcome diagnostics, as the in-process index raises it."""

from __future__ import annotations

import json
from collections import OrderedDict

import httpx

from ehrbench.errors import ConfigError
from ehrbench.fhir.search import SearchResult
from ehrbench.fhir.search_params import MAX_COUNT, SearchError, SearchQuery

_KEPT_RESOURCES = 20_000  # the texts of recent searches, for the resources() call that follows each


class HttpIndex:
    def __init__(self, base_url: str, *, timeout_s: float = 60.0):
        self.base_url = base_url.rstrip("/")
        self.client = httpx.Client(timeout=timeout_s, headers={"Accept": "application/fhir+json"})
        self._texts: OrderedDict[tuple[str, str], str] = OrderedDict()
        try:
            capabilities = self._json(self._get(f"{self.base_url}/metadata"), "/metadata")
        except SearchError as exc:
            self.client.close()
            raise ConfigError(f"fhir_base_url {base_url}: no FHIR server there ({exc})") from None
        rest = (capabilities.get("rest") or [{}])[0]
        self.types: dict[str, int] = {r["type"]: 0 for r in rest.get("resource", []) if "type" in r}

    def read(self, resource_type: str, resource_id: str) -> str | None:
        response = self._get(f"{self.base_url}/{resource_type}/{resource_id}")
        if response.status_code == 404:
            return None
        resource = self._json(response, f"{resource_type}/{resource_id}")
        return self._keep(resource_type, resource)

    def search(self, query: SearchQuery) -> SearchResult:
        params = [*query.params, ("_count", str(min(max(query.count, 1), MAX_COUNT)))]
        if query.offset:
            params.append(("_offset", str(query.offset)))
        url: str | None = f"{self.base_url}/{query.resource_type}"
        ids: list[str] = []
        total = None
        while url and len(ids) < query.count:
            response = self._get(url, params=params if not ids else None)
            bundle = self._json(response, query.resource_type)
            total = bundle.get("total", total)
            for entry in bundle.get("entry", []):
                resource = entry.get("resource") or {}
                if resource.get("resourceType") == query.resource_type and len(ids) < query.count:
                    self._keep(query.resource_type, resource)
                    ids.append(str(resource.get("id")))
            url = next((link.get("url") for link in bundle.get("link", []) if link.get("relation") == "next"), None)
        return SearchResult(total=total if total is not None else query.offset + len(ids), ids=ids)

    def resources(self, resource_type: str, ids: list[str]) -> list[str]:
        texts = []
        for resource_id in ids:
            text = self._texts.get((resource_type, resource_id)) or self.read(resource_type, resource_id)
            if text is None:
                raise SearchError(f"{resource_type}/{resource_id} vanished from the server")
            texts.append(text)
        return texts

    def close(self) -> None:
        self.client.close()

    def _keep(self, resource_type: str, resource: dict) -> str:
        text = json.dumps(resource, ensure_ascii=False)
        key = (resource_type, str(resource.get("id")))
        self._texts[key] = text
        self._texts.move_to_end(key)
        while len(self._texts) > _KEPT_RESOURCES:
            self._texts.popitem(last=False)
        return text

    def _get(self, url: str, params: list[tuple[str, str]] | None = None) -> httpx.Response:
        try:
            return self.client.get(url, params=params)
        except httpx.HTTPError as exc:
            raise SearchError(f"the FHIR server at {self.base_url} did not answer: {type(exc).__name__}: {exc}"
                              ) from None

    @staticmethod
    def _json(response: httpx.Response, what: str) -> dict:
        try:
            body = response.json()
        except ValueError:
            body = {}
        if response.status_code >= 400:
            issues = body.get("issue") or [{}] if isinstance(body, dict) else [{}]
            detail = issues[0].get("diagnostics") or response.reason_phrase
            raise SearchError(f"{what}: HTTP {response.status_code}: {detail}")
        if not isinstance(body, dict):
            raise SearchError(f"{what}: not FHIR JSON")
        return body
