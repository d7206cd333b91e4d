"""A MIMIC-IV-Note 2.2 release written by the tests (the real one is credentialed): PhysioNet's layout (`note/*.csv.gz`
and SHA256SUMS.txt at the root), the columns of mimic-code's DDL in file order, CSV as PhysioNet writes it (every text
quoted, embedded quotes doubled, line breaks inside the text)."""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
from collections.abc import Iterable, Mapping
from pathlib import Path

from ehrbench.sources.releases import CHECKSUM_FILE, release_for

NOTE_RELEASE = release_for("mimic_iv_note", "full")


def write_note_release(folder: Path, tables: Mapping[str, Iterable[Mapping]]) -> Path:
    """`tables`: rows per table name (discharge, radiology, ...) as dicts of the table's columns; a table not given is
    absent from the release. Returns `folder`."""
    sums = []
    for name, rows in tables.items():
        spec = NOTE_RELEASE.table(name)
        text = io.StringIO()
        writer = csv.writer(text, lineterminator="\n", quoting=csv.QUOTE_MINIMAL)
        writer.writerow([column for column, _ in spec.columns])
        for row in rows:
            writer.writerow(["" if row.get(column) is None else row[column] for column, _ in spec.columns])
        path = folder / spec.path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(gzip.compress(text.getvalue().encode("utf-8"), mtime=0))
        sums.append(f"{hashlib.sha256(path.read_bytes()).hexdigest()} {spec.path}\n")
    (folder / CHECKSUM_FILE).write_text("".join(sums))
    return folder


def discharge_text(disposition: str, complaint: str) -> str:
    """A discharge summary in MIMIC-IV-Note's shape: de-identified dates (___), sections, quotes and commas."""
    return "\n".join([
        " ", "Name:  ___                     Unit No:   ___", " ",
        "Admission Date:  ___              Discharge Date:   ___", " ",
        "Date of Birth:  ___             Sex:   F", " ", "Service: MEDICINE", " ",
        "Chief Complaint:", f'"{complaint}", per patient', " ",
        "Discharge Disposition:", disposition, " ",
        "Followup Instructions:", "___", ""])
