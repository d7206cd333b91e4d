"""Errors a user can act on. Each message names the file or table and what was expected;
the CLI prints it on one line and exits non-zero."""


class EhrbenchError(Exception):
    """Base class: a failure caused by input or environment, not a bug."""


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
