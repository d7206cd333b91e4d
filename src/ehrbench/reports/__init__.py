"""Report dashboards of evaluation runs: DuckDB aggregation over the parquet results (`aggregates`, `catalog`,
`assemble`) into plain data (`model`), rendered as a static offline site (`site`, `charts`, `templates/`) and a
Markdown headline table for Prefect (`summary`)."""
