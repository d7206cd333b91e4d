"""Agent evaluation (issue 7): the tasks of a build's suites, trials of agents on them, per-trial scores and the
resumable parquet results the metrics read. Prefect-free; `flows/evaluate.py` maps the trials."""
