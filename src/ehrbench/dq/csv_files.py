"""The agent-visible `data/<table>.csv.gz` files of audit tasks, formatted once per extract.

A task changes a few dozen rows of tables with up to millions, and six tasks share one extract. So the extract's
rows are formatted as CSV records once; a task's file is those records in its table's order with the rows it
corrupted or inserted formatted anew, and a table a task left alone is the extract's own file. Every file is byte
for byte what `frame.to_csv(index=False, lineterminator="\\n")` gzipped without a timestamp writes (the text as
read, "" for a null cell, minimal quoting)."""

from __future__ import annotations

import gzip
import io
from pathlib import Path

import pandas as pd

from ehrbench.dq.extract import ROW_ID, Tables


def csv_text(frame: pd.DataFrame) -> str:
    return frame.to_csv(index=False, lineterminator="\n")


def gzipped(text: str) -> bytes:
    """Reproducible gzip: no name, no timestamp, level 4 (the written bytes depend on the text only). GzipFile, not
    gzip.compress, which marks the OS (Unix) where GzipFile writes "unknown": the files' bytes stay as they were."""
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0, compresslevel=4) as out:
        out.write(text.encode())
    return buffer.getvalue()


def _records(frame: pd.DataFrame) -> tuple[str, list[str]] | None:
    """The header and one CSV record per row, or None when a cell holds a line break (a record would span lines)."""
    lines = csv_text(frame).split("\n")
    if len(lines) != len(frame) + 2:
        return None
    return lines[0], lines[1:-1]


class ExtractFiles:
    """Writes the tables of tasks made from `extract` (the pristine one)."""

    def __init__(self, extract: Tables) -> None:
        self.extract = extract
        self._records: dict[str, tuple[str, dict[str, str]] | None] = {}
        self._pristine: dict[str, bytes] = {}

    def write(self, table: str, frame: pd.DataFrame, changed: set[str], path: Path) -> None:
        """Write a task's `frame` of `table`; `changed` holds the ids of its rows whose cells differ from the
        extract's (corrupted or inserted: every other row is an unchanged pristine row)."""
        if not changed and len(frame) == len(self.extract[table]):
            path.write_bytes(self._pristine_file(table))
            return
        records = self._pristine_records(table)
        ids = frame[ROW_ID].tolist()
        fresh_ids = [row_id for row_id in ids if row_id in changed]
        fresh = _records(frame.loc[fresh_ids])
        if records is None or fresh is None:
            path.write_bytes(gzipped(csv_text(frame)))
            return
        header, pristine = records
        new = dict(zip(fresh_ids, fresh[1], strict=True))
        lines = [new[row_id] if row_id in new else pristine[row_id] for row_id in ids]
        path.write_bytes(gzipped("\n".join([header, *lines, ""])))

    def _pristine_file(self, table: str) -> bytes:
        if table not in self._pristine:
            records = self._pristine_records(table)  # in the extract's order, as the dict was filled
            text = (csv_text(self.extract[table]) if records is None
                    else "\n".join([records[0], *records[1].values(), ""]))
            self._pristine[table] = gzipped(text)
        return self._pristine[table]

    def _pristine_records(self, table: str) -> tuple[str, dict[str, str]] | None:
        if table not in self._records:
            split = _records(self.extract[table])
            self._records[table] = None if split is None else (
                split[0], dict(zip(self.extract[table][ROW_ID].tolist(), split[1], strict=True)))
        return self._records[table]
