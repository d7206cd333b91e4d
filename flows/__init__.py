"""Prefect flows: one file per stage, plus the parent `build_benchmark`."""
