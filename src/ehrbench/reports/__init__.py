"""Report dashboards of evaluation runs: DuckDB aggregation over the parquet results (`aggregates`, `catalog`,
`assemble`) into plain data (`model`), rendered as a static offline site (`site` and its `site_*` page modules,
`charts`, `templates/`), a Markdown headline table for Prefect (`summary`) and the comparison of a run with the
previous one of its series by the same intervals (`compare`)."""
