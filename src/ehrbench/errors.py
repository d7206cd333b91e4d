"""Errors a user can act on. Each message names the file, option or table and what was expected; the CLI prints
it on one line and exits non-zero. Anything else that escapes a command is a bug and is shown with its traceback."""


class EhrbenchError(Exception):
    """Base class: a failure caused by input or environment, not a bug."""


class ConfigError(EhrbenchError, ValueError):
    """Input the user gave is not what was expected: an option or flow parameter, an agent or model spec, a recipe,
    template or rename file. Also a ValueError, so pydantic validators and callers that catch ValueError still do."""


class MissingInputError(EhrbenchError, FileNotFoundError):
    """What a command reads does not exist yet (a warehouse, a build's questions, a run's results, a recipe file);
    the message says which command makes it."""


class EndpointBusyError(EhrbenchError):
    """A model endpoint's concurrency slots stayed taken past the wait; the message says who may hold them."""


class SourceError(EhrbenchError):
    """A raw source directory, file or download is missing or not what the release documents."""


class ChecksumError(SourceError):
    """A file's SHA-256 differs from the release's SHA256SUMS.txt where a match is required."""


class BuildInProgressError(EhrbenchError):
    """Another process holds the warehouse (DuckDB allows a single writer)."""


class TransformError(EhrbenchError):
    """dbt failed; the message carries dbt's own words."""


class ValidationError(EhrbenchError):
    """Built data failed its validation (a Great Expectations suite, or FHIR resources)."""


class PublishError(EhrbenchError):
    """A build folder could not be published."""


class ResultPartError(EhrbenchError):
    """A file among an evaluation run's parts (or its pending rows) that is no readable trial part: not a regular
    file, not parquet, or without the trial key columns. `problem` says what it is instead."""

    def __init__(self, path, problem: str) -> None:
        super().__init__(f"{path}: {problem}; move it aside or delete it")
        self.path = path
        self.problem = problem
