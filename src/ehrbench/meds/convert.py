"""Raw MIMIC-IV files to MEDS data under an event configuration (ehrbench.meds.event_config): the reference solution
of the MEDS conversion tasks, and a script any harness can run:

    python -m ehrbench.meds.convert <event_config.yaml> <data folder> <output folder>

reads `<data folder>/<table>.csv.gz` (e.g. data/hosp/admissions.csv.gz) for every table the configuration names and
writes `<output folder>/data/0.parquet`, checked against the `meds` package's DataSchema.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import duckdb
import meds
import pyarrow as pa

from ehrbench.errors import MissingInputError
from ehrbench.meds.event_config import EventConfig, compile_events, load_event_config
from ehrbench.meds.export import EVENT_ORDER, write_checked
from ehrbench.warehouse import open_duckdb

CORE_COLUMNS = ("subject_id", "time", "code", "numeric_value", "text_value")  # MEDS DataSchema's own columns


def table_file(data_dir: Path, table: str) -> Path:
    return data_dir / f"{table}.csv.gz"


def csv_relation(data_dir: Path) -> Callable[[str], str]:
    """The SQL of a table's file under `data_dir`, every column as text; a missing file is named."""
    def relation(table: str) -> str:
        path = table_file(data_dir, table)
        if not path.is_file():
            raise MissingInputError(f"{path}: the event configuration reads table {table}, expected this file")
        literal = str(path).replace("'", "''")
        return f"select * from read_csv('{literal}', header = true, all_varchar = true)"
    return relation


def convert(config: EventConfig, relation: Callable[[str], str], con: duckdb.DuckDBPyConnection | None = None,
            columns: Sequence[str] = CORE_COLUMNS) -> pa.Table:
    """The events of `config` over `relation`'s tables, in MEDS order (subject, time with static events first)."""
    own = con is None
    con = con or open_duckdb()
    try:
        return con.execute(f"select {', '.join(columns)} from ({compile_events(config, relation)}) as events "
                           f"order by {EVENT_ORDER}").to_arrow_table()
    finally:
        if own:
            con.close()


def write_meds_data(events: pa.Table, output_dir: Path) -> Path:
    """`events` as `output_dir/data/0.parquet`, aligned to and checked against meds.DataSchema."""
    path = output_dir / meds.data_subdirectory / "0.parquet"
    return write_checked(path, meds.DataSchema, events)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ehrbench.meds.convert",
                                     description="Convert raw MIMIC-IV CSV files to MEDS under an event configuration.")
    parser.add_argument("event_config", type=Path)
    parser.add_argument("data_dir", type=Path, help="folder of <table>.csv.gz files, e.g. hosp/admissions.csv.gz")
    parser.add_argument("output_dir", type=Path, help="the MEDS dataset's root; data/0.parquet is written there")
    args = parser.parse_args(argv)
    events = convert(load_event_config(args.event_config), csv_relation(args.data_dir))
    path = write_meds_data(events, args.output_dir)
    print(f"{path}: {events.num_rows} events of {len(set(events.column('subject_id').to_pylist()))} subjects")
    return 0


if __name__ == "__main__":
    sys.exit(main())

