"""Great Expectations validation of warehouse tables (pushed down to DuckDB through SQL)."""

from ehrbench.validation.suites import SuiteResult, load_suite, validate_suite

__all__ = ["SuiteResult", "load_suite", "validate_suite"]
