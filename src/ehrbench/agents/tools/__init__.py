"""The tools an agent under evaluation calls: EHR-ChatQA's database tools (`database`), FHIR-AgentBench's resource
tools (`fhir`), and the value ranking behind value_similarity_search (`similarity`). Each toolbox offers `specs` to
the model and answers its calls with text (`base.Toolbox`)."""

from ehrbench.agents.tools.base import Toolbox, ToolError
from ehrbench.agents.tools.database import DatabaseTools
from ehrbench.agents.tools.fhir import FhirTools
from ehrbench.agents.tools.similarity import ValueSimilarity

__all__ = ["DatabaseTools", "FhirTools", "ToolError", "Toolbox", "ValueSimilarity"]
