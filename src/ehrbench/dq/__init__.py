"""Data-quality auditing tasks (docs/benchmarks.md#data-quality-error-injection): seeded error injection with cluster
gold, and the scorer."""
