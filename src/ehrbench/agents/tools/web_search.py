"""web_search(query): EHR-ChatQA's optional tool for knowledge the database lacks (docs/benchmarks.md#agent-tools),
behind a provider interface so that nothing needs the internet unless a run asks for it.

Offline is the default: without a provider the tool is not offered, and every result row records
`web_search: disabled`. A provider is chosen by the agent option `web_search`: the URL of an HTTP search endpoint
(`HttpSearchProvider`, the one shipped), or the name of a provider registered with `register_provider`. The tool
answers as the published one does: the results' contents as a JSON list (at most 10 results, as its Tavily search).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import urlsplit

import httpx

from ehrbench.agents.tools.base import Tool, ToolError
from ehrbench.llm.tool_chat import ToolSpec

DISABLED = "disabled"  # the `web_search` result column when the tool was not offered
MAX_RESULTS = 10

SPEC = ToolSpec("web_search", "Perform a web search to obtain external knowledge.",
                {"type": "object", "properties": {"query": {"type": "string", "description": "The search query."}},
                 "required": ["query"]})


@dataclass(frozen=True)
class WebResult:
    content: str  # what the agent reads
    title: str | None = None
    url: str | None = None


class WebSearchProvider(Protocol):
    name: str  # recorded in the result rows (column `web_search`); never holds a secret

    def search(self, query: str) -> list[WebResult]:
        """The results for `query`, best first; WebSearchError when the search failed."""
        ...


class WebSearchError(Exception):
    """A search that failed; the message is shown to the agent after "Error: web search failed: "."""


_PROVIDERS: dict[str, Callable[[float], WebSearchProvider]] = {}


def register_provider(name: str, factory: Callable[[float], WebSearchProvider]) -> None:
    """Make `web_search=<name>` select the provider `factory(timeout_s)` makes (register before agents are parsed)."""
    if not name.isidentifier() or name == DISABLED:
        raise ValueError(f"a web search provider name must be an identifier other than {DISABLED!r}, got {name!r}")
    _PROVIDERS[name] = factory


def check_provider_spec(spec: str | None) -> str | None:
    """The option value normalised (None for disabled); ValueError naming the accepted forms otherwise."""
    if spec is None or spec.strip() in ("", DISABLED):
        return None
    spec = spec.strip()
    if spec in _PROVIDERS or _http_url(spec):
        return spec
    known = ", ".join(sorted(_PROVIDERS)) or "none registered"
    raise ValueError(f"web search provider {spec!r}: expected {DISABLED}, the http(s) URL of a search endpoint, or "
                     f"a registered provider name ({known})")


def provider_for(spec: str | None, timeout_s: float = 30.0) -> WebSearchProvider | None:
    """The provider an option value names, or None for disabled."""
    spec = check_provider_spec(spec)
    if spec is None:
        return None
    return _PROVIDERS[spec](timeout_s) if spec in _PROVIDERS else HttpSearchProvider(spec, timeout_s=timeout_s)


def web_search_tool(provider: WebSearchProvider) -> Tool:
    """The web_search tool over `provider`: the contents of its first 10 results as a JSON list."""

    def run(query: str) -> str:
        if not query.strip():
            raise ToolError("query must be a non-empty search query")
        try:
            results = provider.search(query)
        except WebSearchError as exc:
            raise ToolError(f"web search failed: {exc}") from None
        return json.dumps([result.content for result in results[:MAX_RESULTS]], ensure_ascii=False, indent=2)

    return Tool(SPEC, run)


class HttpSearchProvider:
    """A search endpoint over HTTP: POST `{"query": ..., "max_results": 10}` as JSON to `url`; the answer is JSON,
    `{"results": [{"content", "title", "url"}, …]}` (the shape of Tavily's search API) or a bare list of such
    objects or of strings. No key is sent: put a keyed service behind a local proxy."""

    def __init__(self, url: str, *, timeout_s: float = 30.0, max_results: int = MAX_RESULTS):
        if not _http_url(url):
            raise ValueError(f"web search endpoint {url!r}: expected an http(s) URL with a host")
        self.url = url
        self.timeout_s = timeout_s
        self.max_results = max_results
        parts = urlsplit(url)  # the name leaves out credentials and the query string, which may hold a key
        self.name = f"http:{parts.scheme}://{parts.hostname}{f':{parts.port}' if parts.port else ''}{parts.path}"

    def search(self, query: str) -> list[WebResult]:
        try:
            response = httpx.post(self.url, json={"query": query, "max_results": self.max_results},
                                  timeout=self.timeout_s)
        except httpx.TimeoutException:
            raise WebSearchError(f"the search endpoint did not answer within {self.timeout_s:g} s") from None
        except httpx.HTTPError as exc:
            raise WebSearchError(f"the search endpoint could not be reached ({type(exc).__name__})") from None
        if response.status_code != 200:
            raise WebSearchError(f"the search endpoint answered HTTP {response.status_code}")
        try:
            body = response.json()
        except ValueError:
            raise WebSearchError("the search endpoint's answer is not JSON") from None
        items = body.get("results") if isinstance(body, dict) else body
        if not isinstance(items, list):
            raise WebSearchError("the search endpoint's answer holds no list of results")
        return [result for item in items[:self.max_results] if (result := _result(item)) is not None]


def _result(item: object) -> WebResult | None:
    if isinstance(item, str):
        return WebResult(item)
    if isinstance(item, dict) and isinstance(item.get("content"), str):
        return WebResult(item["content"], item.get("title"), item.get("url"))
    return None


def _http_url(text: str) -> bool:
    parts = urlsplit(text)
    return parts.scheme in ("http", "https") and bool(parts.hostname)
