"""The task-file formats `ehrbench tasks import --format` takes, by name. A new format is a module with a
`TaskFormat` subclass (ehrbench.tasksets.formats), added below."""

from __future__ import annotations

from ehrbench.errors import ConfigError
from ehrbench.tasksets.ehrchatqa import EhrChatQaFormat
from ehrbench.tasksets.ehrnoteqa import EhrNoteQaFormat
from ehrbench.tasksets.ehrsql2022 import Ehrsql2022Format
from ehrbench.tasksets.ehrsql2024 import Ehrsql2024Format
from ehrbench.tasksets.fhir_agentbench import FhirAgentBenchFormat
from ehrbench.tasksets.formats import TaskFormat

FORMATS: dict[str, TaskFormat] = {fmt.name: fmt for fmt in (Ehrsql2024Format(), Ehrsql2022Format(),
                                                              EhrChatQaFormat(), FhirAgentBenchFormat(),
                                                              EhrNoteQaFormat())}


def format_named(name: str) -> TaskFormat:
    if name in FORMATS:
        return FORMATS[name]
    raise ConfigError(f"--format: unknown format {name!r}; expected one of {', '.join(FORMATS)}")


def format_of_protocol(protocol: str) -> TaskFormat | None:
    return next((fmt for fmt in FORMATS.values() if fmt.protocol == protocol), None)
