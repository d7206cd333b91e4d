"""The tools an agent under evaluation calls: EHR-ChatQA's database tools (`database`, as published: `ehrchatqa`,
the catalog they show: `catalog`), its optional web search behind a provider (`web_search`), FHIR-AgentBench's
resource tools (`fhir`), and the value ranking behind value_similarity_search (`similarity`). Each toolbox offers
`specs` to the model and answers its calls with text (`base.Toolbox`)."""

from ehrbench.agents.tools.base import Toolbox, ToolError
from ehrbench.agents.tools.database import DatabaseTools
from ehrbench.agents.tools.fhir import FhirTools
from ehrbench.agents.tools.similarity import ValueSimilarity
from ehrbench.agents.tools.web_search import HttpSearchProvider, WebResult, WebSearchProvider, register_provider

__all__ = ["DatabaseTools", "FhirTools", "HttpSearchProvider", "ToolError", "Toolbox", "ValueSimilarity",
           "WebResult", "WebSearchProvider", "register_provider"]
