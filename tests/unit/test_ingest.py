"""Loading a (fake) release into a real DuckDB file: verification, types, skipping, and bad input."""

from __future__ import annotations

import shutil

import pytest

from ehrbench.errors import ChecksumError, SourceError
from ehrbench.sources.checksums import Verification
from ehrbench.sources.ingest import ingest_release
from ehrbench.sources.releases import release_for

from .fakes import expected_rows, gzip_csv, rows_for, write_release, write_sums, write_table


def _by_table(results):
    return {r.table: r for r in results}


def _count(con, table):
    return con.execute(f"select count(*) from raw_mimic_iv.{table}").fetchone()[0]


def _loaded_at(con):
    return dict(con.execute("select table_name, loaded_at from ingest_meta.loaded_files").fetchall())


def _column_type(con, table, column):
    return con.execute("select data_type from information_schema.columns where table_schema = 'raw_mimic_iv' "
                       "and table_name = ? and column_name = ?", [table, column]).fetchone()[0]


def test_fake_release_loads_with_counts_and_documented_types(warehouse, mimic, fake_mimic):
    root, counts = fake_mimic
    seen = []
    results = _by_table(ingest_release(warehouse, mimic, root, origin="local", on_table=seen.append))

    assert [r.table for r in seen] == [spec.name for spec in mimic.tables]  # once per table, in order
    for name, rows in counts.items():
        assert results[name].action == "loaded"
        assert results[name].status == "verified"
        assert results[name].rows == rows
        assert _count(warehouse, name) == rows, name
    assert len(set(counts.values())) > 1  # the fake gives tables different sizes, so counts can't be swapped
    assert _column_type(warehouse, "admissions", "admittime") == "TIMESTAMP"
    assert _column_type(warehouse, "admissions", "hadm_id") == "INTEGER"
    assert _column_type(warehouse, "patients", "dod") == "DATE"
    assert _column_type(warehouse, "patients", "anchor_age") == "SMALLINT"
    assert _column_type(warehouse, "labevents", "valuenum") == "DOUBLE"
    assert warehouse.execute("select admittime from raw_mimic_iv.admissions order by admittime limit 1"
                             ).fetchone()[0].isoformat() == "2180-01-01T10:00:00"
    meta = warehouse.execute("select row_count from ingest_meta.loaded_files where table_name = 'patients'"
                             ).fetchone()
    assert meta == (counts["patients"],)


def test_absent_optional_table_is_empty_and_typed(warehouse, mimic, fake_mimic):
    root, _ = fake_mimic
    omr = _by_table(ingest_release(warehouse, mimic, root, origin="local"))["omr"]
    assert (omr.status, omr.action, omr.rows, omr.required) == ("absent", "absent", 0, False)
    assert _count(warehouse, "omr") == 0
    assert _column_type(warehouse, "omr", "chartdate") == "DATE"
    columns = [r[0] for r in warehouse.execute("select column_name from information_schema.columns where "
                                               "table_schema = 'raw_mimic_iv' and table_name = 'omr' "
                                               "order by ordinal_position").fetchall()]
    assert columns == [name for name, _ in mimic.table("omr").columns]


def test_unchanged_files_are_not_reloaded(warehouse, mimic, fake_mimic):
    root, counts = fake_mimic
    ingest_release(warehouse, mimic, root, origin="local")
    before = _loaded_at(warehouse)

    again = _by_table(ingest_release(warehouse, mimic, root, origin="local"))

    assert {r.action for name, r in again.items() if name in counts} == {"unchanged"}
    assert {r.action for name, r in again.items() if name not in counts} == {"absent"}
    assert all(again[name].rows == rows and again[name].status == "verified" for name, rows in counts.items())
    assert _loaded_at(warehouse) == before
    assert len(before) == len(counts)


def test_only_the_changed_file_is_reloaded(warehouse, mimic, fake_mimic):
    root, counts = fake_mimic
    ingest_release(warehouse, mimic, root, origin="local")
    before = _loaded_at(warehouse)
    patients = mimic.table("patients")
    write_table(root, patients, counts["patients"] + 4)
    write_sums(root)

    again = _by_table(ingest_release(warehouse, mimic, root, origin="local"))

    assert [name for name, r in again.items() if r.action == "loaded"] == ["patients"]
    assert again["patients"].rows == counts["patients"] + 4
    assert _count(warehouse, "patients") == counts["patients"] + 4
    after = _loaded_at(warehouse)
    assert after["patients"] > before["patients"]
    assert {k: v for k, v in after.items() if k != "patients"} == {k: v for k, v in before.items()
                                                                   if k != "patients"}


def test_dropped_table_is_reloaded_even_if_its_file_is_unchanged(warehouse, mimic, fake_mimic):
    root, counts = fake_mimic
    ingest_release(warehouse, mimic, root, origin="local")
    warehouse.execute("drop table raw_mimic_iv.icustays")
    again = _by_table(ingest_release(warehouse, mimic, root, origin="local"))
    assert again["icustays"].action == "loaded"
    assert _count(warehouse, "icustays") == counts["icustays"]


def test_eicu_release_loads_into_lower_case_tables(warehouse, tmp_path):
    eicu = release_for("eicu")
    root = tmp_path / "eicu"
    counts = write_release(root, eicu)
    assert (root / "intakeOutput.csv.gz").exists()
    results = _by_table(ingest_release(warehouse, eicu, root, origin="downloaded"))
    assert results["intakeoutput"].rows == counts["intakeoutput"]
    loaded = warehouse.execute("select count(*) from raw_eicu.intakeoutput").fetchone()[0]
    assert loaded == counts["intakeoutput"]
    assert results["hospital"].status == "verified"
    assert warehouse.execute("select bool_and(teachingstatus) from raw_eicu.hospital").fetchone()[0] is True


# --- bad input -----------------------------------------------------------------------------------

def test_missing_directory(warehouse, mimic, tmp_path):
    missing = tmp_path / "nowhere"
    with pytest.raises(SourceError) as info:
        ingest_release(warehouse, mimic, missing, origin="local")
    message = str(info.value)
    assert str(missing) in message and "does not exist" in message
    assert "mimic_iv demo 2.2" in message  # what was expected there


def test_missing_required_file_names_table_and_directory(warehouse, mimic, fake_mimic):
    root, _ = fake_mimic
    (root / "icu" / "icustays.csv.gz").unlink()
    with pytest.raises(SourceError) as info:
        ingest_release(warehouse, mimic, root, origin="local")
    message = str(info.value)
    assert "icustays (icu/icustays.csv.gz)" in message
    assert f"searched {root}" in message
    assert "patients" not in message
    # nothing was loaded before failing
    assert warehouse.execute("select count(*) from information_schema.schemata "
                             "where schema_name = 'raw_mimic_iv'").fetchone()[0] == 0


def test_truncated_local_file_is_rejected(warehouse, mimic, fake_mimic):
    root, _ = fake_mimic
    spec = mimic.table("labevents")
    # 3000 rows with distinct ids: long enough that the cut lands well after the (readable) header line
    rows = [[str(n)] + cells[1:] for n, cells in enumerate(rows_for(spec, 3) * 1000)]
    data = gzip_csv([name for name, _ in spec.columns], rows)
    path = root / spec.path
    path.write_bytes(data[: len(data) * 2 // 3])
    write_sums(root, overrides={spec.path: "0" * 64})  # local and unverified: only the gzip check can tell
    with pytest.raises(SourceError) as info:
        ingest_release(warehouse, mimic, root, origin="local")
    message = str(info.value)
    assert str(path) in message
    assert "the file is truncated" in message.replace(str(path), "")  # the tmp path itself says "truncated"


@pytest.mark.parametrize("change", ["rename", "drop"])
def test_wrong_header_names_expected_columns(warehouse, mimic, fake_mimic, change):
    root, _ = fake_mimic
    spec = mimic.table("admissions")
    header = [name for name, _ in spec.columns]
    rows = rows_for(spec, 2)
    if change == "rename":
        header[2] = "admit_time"
    else:  # the last column is gone from the header and the rows
        header, rows = header[:-1], [row[:-1] for row in rows]
    (root / spec.path).write_bytes(gzip_csv(header, rows))
    write_sums(root)
    with pytest.raises(SourceError) as info:
        ingest_release(warehouse, mimic, root, origin="local")
    message = str(info.value)
    assert str(root / spec.path) in message and "mimic_iv.admissions" in message
    assert "expected columns: " + ",".join(name for name, _ in spec.columns) in message
    assert ("missing ['admittime'], unexpected ['admit_time']" if change == "rename"
            else "missing ['hospital_expire_flag']") in message


def test_checksum_mismatch_in_strict_mode(warehouse, mimic, fake_mimic):
    root, _ = fake_mimic
    spec = mimic.table("patients")
    write_sums(root, overrides={spec.path: "b" * 64})
    with pytest.raises(ChecksumError) as info:
        ingest_release(warehouse, mimic, root, origin="local", strict_checksums=True)
    message = str(info.value)
    assert str(root / spec.path) in message and "mimic_iv.patients" in message
    assert "expected " + "b" * 64 in message


def test_checksum_mismatch_without_strict_loads_unverified(warehouse, mimic, fake_mimic):
    root, counts = fake_mimic
    spec = mimic.table("patients")
    write_sums(root, overrides={spec.path: "b" * 64})
    results = _by_table(ingest_release(warehouse, mimic, root, origin="local"))
    patients = results["patients"]
    assert (patients.status, patients.verification, patients.action) == ("unverified", Verification.MISMATCH,
                                                                         "loaded")
    assert patients.expected_sha256 == "b" * 64 and patients.sha256 != "b" * 64
    assert _count(warehouse, "patients") == counts["patients"]
    assert results["admissions"].status == "verified"


def test_downloaded_file_must_match(warehouse, mimic, fake_mimic):
    root, _ = fake_mimic
    write_sums(root, overrides={"hosp/patients.csv.gz": "b" * 64})
    with pytest.raises(ChecksumError, match="downloaded files must match"):
        ingest_release(warehouse, mimic, root, origin="downloaded")


def test_strict_mode_without_sha256sums(warehouse, mimic, fake_mimic):
    root, _ = fake_mimic
    (root / "SHA256SUMS.txt").unlink()
    with pytest.raises(ChecksumError) as info:
        ingest_release(warehouse, mimic, root, origin="local", strict_checksums=True)
    assert str(root / "SHA256SUMS.txt") in str(info.value)
    results = ingest_release(warehouse, mimic, root, origin="local")  # lenient: loads, all unlisted
    assert {r.verification for r in results if r.action == "loaded"} == {Verification.UNLISTED}


def test_value_that_does_not_fit_its_type_rolls_back(warehouse, mimic, fake_mimic):
    root, counts = fake_mimic
    ingest_release(warehouse, mimic, root, origin="local")
    meta_before = warehouse.execute("select * from ingest_meta.loaded_files order by table_name").fetchall()
    spec = mimic.table("patients")
    rows = rows_for(spec, 5)
    rows[3][0] = "abc"  # subject_id is INTEGER
    write_table(root, spec, rows)
    write_sums(root)

    with pytest.raises(SourceError) as info:
        ingest_release(warehouse, mimic, root, origin="local")

    message = str(info.value)
    assert str(root / spec.path) in message and "mimic_iv.patients" in message
    assert 'column "subject_id"' in message and '"abc"' in message and "INTEGER" in message
    assert _count(warehouse, "patients") == counts["patients"]
    meta_after = warehouse.execute("select * from ingest_meta.loaded_files order by table_name").fetchall()
    assert meta_after == meta_before
    # the connection is usable afterwards and a fixed file loads
    write_table(root, spec, 5)
    write_sums(root)
    assert _by_table(ingest_release(warehouse, mimic, root, origin="local"))["patients"].rows == 5


def test_real_demo_patients_load_verified(warehouse, mimic, mimic_demo_dir, tmp_path):
    """The fake's format is the real one: a real demo file (with the real SHA256SUMS) loads verified."""
    root = tmp_path / "demo"
    for spec in mimic.tables:
        if spec.name in ("patients", "admissions"):  # real files
            (root / spec.path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(mimic_demo_dir / spec.path, root / spec.path)
        elif spec.required:  # small fakes for the rest
            write_table(root, spec, expected_rows(spec))
    shutil.copyfile(mimic_demo_dir / "SHA256SUMS.txt", root / "SHA256SUMS.txt")
    results = _by_table(ingest_release(warehouse, mimic, root, origin="local"))
    assert results["patients"].status == "verified" and results["admissions"].status == "verified"
    assert results["patients"].rows == 100
    assert results["icustays"].verification is Verification.MISMATCH  # our fake file, the real checksum
    patients = warehouse.execute("select count(distinct subject_id) from raw_mimic_iv.admissions").fetchone()
    assert patients == (100,)
