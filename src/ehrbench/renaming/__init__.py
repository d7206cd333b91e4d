"""Renamed schemas (profiles `renamed` and `renamed_random`, docs/benchmarks.md#ehr-chatqa-renamed-schemas): the
published EHR-ChatQA map, seeded synonym draws on top of it, and rewriting SQL for a renamed schema."""

from ehrbench.renaming.random_rename import draw_random_rename, load_vocabulary
from ehrbench.renaming.schema_rename import SchemaRename, TableRename, published_rename
from ehrbench.renaming.sql import EHRSQL_PLACEHOLDERS, TABLE_NAME_COLUMNS, rename_sql, table_name_value_columns

__all__ = [
    "EHRSQL_PLACEHOLDERS",
    "TABLE_NAME_COLUMNS",
    "SchemaRename",
    "TableRename",
    "draw_random_rename",
    "load_vocabulary",
    "published_rename",
    "rename_sql",
    "table_name_value_columns",
]
