"""Synthetic scale-up: the MIMIC-IV demo replicated x1, x10, x100 with new ids, staging and profiles rebuilt.

    uv run python bench/scaleup.py [--factors 1,10,100] [--with-tests] [--with-eicu] [--work-dir DIR]
                                   [--mimic-iv-dir DIR] [--eicu-dir DIR]

Per factor f, on a new warehouse under --work-dir (default data/bench/, gitignored; deleted afterwards):
1. ingest the MIMIC-IV demo, then append f-1 copies of every patient table of raw_mimic_iv (every table with a
   subject_id; d_* dictionaries, caregiver and provider are shared, not copied). Copy k shifts every id column by
   k * (span of that column over all tables), the same shift for the same column name everywhere (linkorderid
   takes orderid's, transfer_id stay_id's), so copies never collide and foreign keys stay consistent; text ids
   '<subject_id>-<n>' (poe_id, emar_id, ...) get the subject_id shift on their prefix; references to shared tables
   (itemid, caregiver_id) stay. An INTEGER id space whose shifted maximum would overflow is first renumbered
   densely (order kept), so that every column keeps its documented type.
   Then the rename-map seed is loaded (`dbt run` does not load seeds). Not timed as part of the build.
2. time `dbt build --select staging` and `dbt run --select <PROFILE_SELECTION>` (`build`, with data
   tests, with --with-tests) each in a fresh Python process, with ehrsql2024.num_patients = 100 * f so that the
   cohort grows with the data.
eICU is skipped unless --with-eicu (then its demo is ingested once, not replicated, and its profiles built too);
without it everything downstream of the eICU sources is excluded (`--exclude source:eicu+`).

Reports per factor: raw rows, chartevents rows, profile output rows (sum over the benchmark schemas), wall
seconds and peak RSS for staging and profiles, seconds per million raw rows. Prints a table, then a JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

from fresh_process import run_fresh

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data"
SCHEMA = "raw_mimic_iv"
INT32_MAX = 2**31 - 1
COPY_ROWS = 5_000_000  # rows per replication insert (x100: chartevents' 66 M rows in 14 inserts, the rest in one each)
# Columns that hold ids of one id space share its shift: linkorderid points at an orderid, and an ICU stay_id is
# the transfer_id of its first ICU transfer.
SHIFT_GROUPS = {"linkorderid": "orderid", "transfer_id": "stay_id"}
# Everything downstream of the raw eICU tables (staging, profiles, lineage, tests touching them): new eICU models
# drop out of a MIMIC-IV-only run without a list to maintain.
WITHOUT_EICU = ("--exclude", "source:eicu+")


def parse_factor_options(parser: argparse.ArgumentParser) -> argparse.Namespace:
    """The options the scale-up benches (dq.py, fhir.py, meds.py) share, added to `parser` and parsed with its own:
    --factors (parsed into a list of ints), --work-dir, --mimic-iv-dir (which must be a folder)."""
    parser.add_argument("--factors", default="1,10", help="comma-separated replication factors")
    parser.add_argument("--work-dir", type=Path, default=REPO / "data" / "bench")
    parser.add_argument("--mimic-iv-dir", type=Path, default=SHARED / "mimic-iv-demo-2.2")
    options = parser.parse_args()
    if not options.mimic_iv_dir.is_dir():
        raise SystemExit(f"MIMIC-IV demo not found at {options.mimic_iv_dir} (--mimic-iv-dir)")
    options.factors = [int(f) for f in options.factors.split(",")]
    return options


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def replicate(con, factor: int) -> dict:
    """Append factor-1 id-shifted copies of every patient table of raw_mimic_iv (see the module docstring)."""
    columns: dict[str, list[tuple[str, str]]] = {}
    for table, column, kind in con.execute(
            "select c.table_name, c.column_name, c.data_type from information_schema.columns c "
            "join information_schema.tables t using (table_catalog, table_schema, table_name) "
            "where c.table_schema = ? and t.table_type = 'BASE TABLE' order by c.table_name, c.ordinal_position",
            [SCHEMA]).fetchall():
        columns.setdefault(table, []).append((column, kind))
    copied = sorted(t for t, cols in columns.items() if any(c == "subject_id" for c, _ in cols))
    # A column also found in a shared table refers to it (itemid -> d_items, caregiver_id -> caregiver): unshifted.
    shared = {c for t, cols in columns.items() if t not in copied for c, _ in cols}
    candidates = {(t, c, kind) for t in copied for c, kind in columns[t]
                  if c.endswith("id") and not c.endswith("itemid") and c not in shared}
    int_ids = {(t, c, kind) for t, c, kind in candidates if kind in ("INTEGER", "BIGINT")}
    shifted_ints = {(t, c) for t, c, _ in int_ids}
    text_ids = set()
    for t, c, kind in candidates:
        if kind == "VARCHAR" and con.execute(
                f"select coalesce(bool_and(regexp_full_match({_quote(c)}, '\\d+-\\d+')), false) "
                f"from {SCHEMA}.{_quote(t)}").fetchone()[0]:
            text_ids.add((t, c))

    bounds: dict[str, list[int]] = {}
    for t, c, _ in int_ids:
        low, high = con.execute(f"select min({_quote(c)}), max({_quote(c)}) from {SCHEMA}.{_quote(t)}").fetchone()
        if low is not None:
            group = bounds.setdefault(SHIFT_GROUPS.get(c, c), [low, high])
            group[0], group[1] = min(group[0], low), max(group[1], high)
    shift = {group: high - low + 1 for group, (low, high) in bounds.items()}
    # An id space too sparse for its documented INTEGER type at this factor (the demo's 100 patients hold ids from
    # all over MIMIC-IV's range: pharmacy_id spans ~10^8) is renumbered first, order kept, so that every copy fits.
    compacted = sorted(group for group in bounds if any(
        kind == "INTEGER" and SHIFT_GROUPS.get(c, c) == group for _, c, kind in int_ids)
        and bounds[group][1] + (factor - 1) * shift[group] > INT32_MAX)
    for group in compacted:
        members = sorted((t, c) for t, c, _ in int_ids if SHIFT_GROUPS.get(c, c) == group)
        low = bounds[group][0]
        values = " union ".join(f"select {_quote(c)} as old from {SCHEMA}.{_quote(t)}" for t, c in members)
        con.execute(f"create or replace temp table id_map as select old, {low} + row_number() over (order by old) "
                    f"- 1 as new from ({values}) where old is not null")
        for t, c in members:
            con.execute(f"update {SCHEMA}.{_quote(t)} set {_quote(c)} = id_map.new from id_map "
                        f"where {SCHEMA}.{_quote(t)}.{_quote(c)} = id_map.old")
        distinct = con.execute("select count(*) from id_map").fetchone()[0]
        bounds[group], shift[group] = [low, low + distinct - 1], distinct
        con.execute("drop table id_map")

    for t in copied:
        shifted = []
        for c, _ in columns[t]:
            group = SHIFT_GROUPS.get(c, c)
            if (t, c) in shifted_ints and group in shift:
                shifted.append(f"{_quote(c)} + copies.copy_number * {shift[group]}")
            elif (t, c) in text_ids:
                shifted.append(f"(split_part({_quote(c)}, '-', 1)::bigint + copies.copy_number * {shift['subject_id']})"
                               f"::varchar || '-' || split_part({_quote(c)}, '-', 2)")
            else:
                shifted.append(_quote(c))
        # Copies inserted many at a time from a snapshot of the demo rows, in the order they would have been appended
        # copy by copy: the file order (dbt's file_row) stays demo order within each copy, copies one after the other.
        # At most COPY_ROWS rows per insert: the order by sorts them in memory.
        con.execute(f"create or replace temp table demo_rows as select *, rowid as demo_row from {SCHEMA}.{_quote(t)}")
        per_insert = max(1, COPY_ROWS // max(con.execute("select count(*) from demo_rows").fetchone()[0], 1))
        for first in range(1, factor, per_insert):
            con.execute(f"insert into {SCHEMA}.{_quote(t)} select {', '.join(shifted)} "
                        f"from demo_rows cross join range({first}, {min(first + per_insert, factor)}::bigint) "
                        "as copies(copy_number) order by copies.copy_number, demo_rows.demo_row")
        con.execute("drop table demo_rows")
    patient_rows = sum(con.execute(f"select count(*) from {SCHEMA}.{_quote(t)}").fetchone()[0] for t in copied)
    return {"copied_tables": len(copied), "patient_rows": patient_rows, "shifts": shift,
            "text_ids": sorted({c for _, c in text_ids}), "compacted": compacted}


PRELUDE = """
import json, resource, sys, time
from pathlib import Path
args = json.loads(sys.argv[1])
"""
PREPARE = """
sys.path.insert(0, args["bench_dir"])
from scaleup import replicate
from ehrbench.sources import release_for
from ehrbench.sources.ingest import ingest_release
from ehrbench.transform import run_dbt
from ehrbench.warehouse import connect
warehouse = Path(args["warehouse"])
out = {}
t = time.perf_counter()
with connect(warehouse) as con:
    ingest_release(con, release_for("mimic_iv"), Path(args["mimic_iv_dir"]), origin="local")
    if args["eicu_dir"]:
        ingest_release(con, release_for("eicu"), Path(args["eicu_dir"]), origin="local")
    out["ingest_s"] = time.perf_counter() - t
    t = time.perf_counter()
    out.update(replicate(con, args["factor"]))
    con.execute("checkpoint")
    out["replicate_s"] = time.perf_counter() - t
    out["subjects_unique"] = con.execute(
        "select count(*) = count(distinct subject_id) from raw_mimic_iv.patients").fetchone()[0]
    out["hadm_unique"] = con.execute(
        "select count(*) = count(distinct hadm_id) from raw_mimic_iv.admissions").fetchone()[0]
# Same --vars as the timed steps, so their partial parsing is warm.
run_dbt(["seed", "--select", "ehrchatqa_rename_map"], warehouse=warehouse, work_dir=Path(args["dbt_work"]),
        vars=args["vars"])
"""

DBT_STEP = """
import statistics
from ehrbench.transform import run_dbt
import dbt.cli.main  # noqa: F401  (its import counts as start-up, not as dbt's run)
t = time.perf_counter()
run = run_dbt(args["command"], warehouse=Path(args["warehouse"]), work_dir=Path(args["dbt_work"]), vars=args["vars"])
out = {"invoke_s": time.perf_counter() - t, "node_s": run.span_seconds, "nodes": len(run.nodes),
       "node_median_s": statistics.median([n.seconds for n in run.nodes] or [0]),
       "statuses": run.summary,
       "slowest": sorted(([n.unique_id.split(".")[2], round(n.seconds, 2)] for n in run.nodes),
                         key=lambda x: -x[1])[:5]}
"""


def child(code: str, args: dict) -> dict:
    return run_fresh(PRELUDE + code, args, f"step {args.get('command', 'prepare')}")


def dictionary_tables() -> set[tuple[str, str]]:
    """(schema, table) of the profiles' dictionary tables (the d_* tables under their profile names)."""
    from ehrbench.profiles import BENCHMARK_DATABASES, schema_renames

    renames = schema_renames(0)
    found = set()
    for db in BENCHMARK_DATABASES:
        rename = renames.get(db.key)
        found |= {(db.schema, t.target if rename else t.source)
                  for t in (rename or renames[f"renamed/{db.database}"]).tables if t.source.startswith("d_")}
    return found


def count_rows(warehouse: Path, schemas: list[str]) -> dict[str, int]:
    from ehrbench.warehouse import connect

    dictionaries = dictionary_tables()
    with connect(warehouse, read_only=True) as con:
        names = con.execute("select table_schema, table_name from information_schema.tables where table_schema in "
                            f"({', '.join('?' for _ in schemas)})", schemas).fetchall()
        counts = {s: 0 for s in schemas} | {"events": 0}
        for s, t in names:
            rows = con.execute(f"select count(*) from {_quote(s)}.{_quote(t)}").fetchone()[0]
            counts[s] += rows
            # Patient rows, apart from the dictionaries, which do not grow with the factor.
            if s not in (SCHEMA, "raw_eicu") and (s, t) not in dictionaries:
                counts["events"] += rows
        counts["chartevents"] = con.execute(f"select count(*) from {SCHEMA}.chartevents").fetchone()[0]
    return counts


def run_factor(factor: int, options, work: Path) -> dict:
    from ehrbench.profiles import BENCHMARK_DATABASES, PROFILE_SELECTION, profile_vars

    dbt_vars = profile_vars(0)
    dbt_vars["ehrsql2024"]["num_patients"] = 100 * factor
    folder = work / f"x{factor}"
    shutil.rmtree(folder, ignore_errors=True)
    warehouse = folder / "warehouse.duckdb"
    # One dbt target/ for all factors is fine: partial parsing is keyed on the vars, which change per factor.
    base = {"warehouse": str(warehouse), "dbt_work": str(work / "dbt"), "vars": dbt_vars}
    try:
        prepared = child(PREPARE, {**base, "bench_dir": str(Path(__file__).parent), "factor": factor,
                                   "mimic_iv_dir": str(options.mimic_iv_dir),
                                   "eicu_dir": str(options.eicu_dir) if options.with_eicu else ""})
        print(f"x{factor}: ingested {prepared['ingest_s']:.1f} s, replicated {prepared['replicate_s']:.1f} s",
              file=sys.stderr, flush=True)
        eicu = [] if options.with_eicu else list(WITHOUT_EICU)
        staging = child(DBT_STEP, {**base, "command": ["build", "--select", "staging", *eicu]})
        print(f"x{factor}: staging {staging['wall_s']:.1f} s", file=sys.stderr, flush=True)
        verb = "build" if options.with_tests else "run"
        profiles = child(DBT_STEP, {**base, "command": [verb, "--select", *PROFILE_SELECTION, *eicu]})
        print(f"x{factor}: profiles {profiles['wall_s']:.1f} s", file=sys.stderr, flush=True)
        schemas = [db.schema for db in BENCHMARK_DATABASES if options.with_eicu or db.database != "eicu"]
        raw = [SCHEMA, "raw_eicu"] if options.with_eicu else [SCHEMA]
        counts = count_rows(warehouse, [*raw, *schemas])
        disk = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    finally:
        if not options.keep:
            shutil.rmtree(folder, ignore_errors=True)
    raw_rows = sum(counts[s] for s in raw)
    return {"factor": factor, "num_patients": 100 * factor, "raw_rows": raw_rows,
            "chartevents_rows": counts["chartevents"], "profile_rows": sum(counts[s] for s in schemas),
            "profile_patient_rows": counts["events"],
            "profile_rows_by_schema": {s: counts[s] for s in schemas}, "warehouse_gib": disk / 2**30,
            "prepare": prepared, "staging": staging, "profiles": profiles,
            "s_per_m_raw_rows": (staging["wall_s"] + profiles["wall_s"]) / (raw_rows / 1e6)}


def _rounded(value):
    if isinstance(value, float):
        return round(value, 3)
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--factors", default="1,10,100", help="comma-separated replication factors")
    parser.add_argument("--with-tests", action="store_true", help="dbt build (models + data tests) for the profiles")
    parser.add_argument("--with-eicu", action="store_true", help="also ingest the eICU demo (not replicated)")
    parser.add_argument("--work-dir", type=Path, default=REPO / "data" / "bench",
                        help="where the per-factor warehouses go (default data/bench/, gitignored)")
    parser.add_argument("--keep", action="store_true", help="keep each factor's warehouse (default: delete it)")
    parser.add_argument("--mimic-iv-dir", default=os.environ.get("EHRBENCH_MIMIC_IV_DIR")
                        or SHARED / "mimic-iv-demo-2.2")
    parser.add_argument("--eicu-dir", default=os.environ.get("EHRBENCH_EICU_DIR") or SHARED / "eicu-demo-2.0.1")
    options = parser.parse_args()
    factors = [int(f) for f in options.factors.split(",")]
    if any(f < 1 for f in factors):
        parser.error("factors must be >= 1")
    work = options.work_dir.resolve() / "scaleup"
    work.mkdir(parents=True, exist_ok=True)

    load_before = os.getloadavg()[0]  # another process on the 2 cores skews every figure: say so
    rows: list[dict] = []
    skipped: dict[int, str] = {}
    for factor in factors:
        free = shutil.disk_usage(work).free
        # The warehouse grows about linearly with the factor; keep 2x the extrapolated size free for DuckDB's
        # spill files and checkpoints.
        if rows and (need := 2 * rows[-1]["warehouse_gib"] * 2**30 * factor / rows[-1]["factor"]) > free:
            skipped[factor] = f"needs ~{need / 2**30:.1f} GiB, {free / 2**30:.1f} GiB free in {work}"
            print(f"x{factor}: skipped: {skipped[factor]}", file=sys.stderr)
            continue
        try:
            rows.append(run_factor(factor, options, work))
        except RuntimeError as exc:
            skipped[factor] = str(exc).splitlines()[0]
            print(f"x{factor}: {exc}", file=sys.stderr)
    shutil.rmtree(work / "dbt", ignore_errors=True)

    verb = "build (models + tests)" if options.with_tests else "run (models only)"
    print(f"Synthetic MIMIC-IV scale-up ({os.cpu_count()} cores, Python {sys.version.split()[0]}, 1-min load average "
          f"{load_before:.1f} before, {os.getloadavg()[0]:.1f} after)")
    eicu = " (eICU demo not replicated)" if options.with_eicu else " --exclude source:eicu+ (eICU skipped)"
    print(f"staging = dbt build --select staging; profiles = dbt {verb} --select "
          f"PROFILE_SELECTION{eicu}; each in a fresh process after an untimed dbt run with the same --vars")
    print(f"{'factor':>6}{'raw rows':>12}{'chartevents':>13}{'profile rows':>14}{'non-dict':>12}{'staging s':>11}"
          f"{'RSS MiB':>9}{'profiles s':>12}{'nodes s':>9}{'RSS MiB':>9}{'s/M raw':>9}{'GiB':>6}")
    for r in rows:
        st, pr = r["staging"], r["profiles"]
        print(f"{'x' + str(r['factor']):>6}{r['raw_rows']:>12,}{r['chartevents_rows']:>13,}{r['profile_rows']:>14,}"
              f"{r['profile_patient_rows']:>12,}{st['wall_s']:>11.1f}{st['peak_rss_mib']:>9.0f}{pr['wall_s']:>12.1f}"
              f"{pr['node_s']:>9.1f}{pr['peak_rss_mib']:>9.0f}{r['s_per_m_raw_rows']:>9.2f}{r['warehouse_gib']:>6.2f}")
    for factor, why in skipped.items():
        print(f"{'x' + str(factor):>6}  not measured: {why}")
    if rows:
        print("s/M raw = (staging + profiles wall) / million raw rows; nodes s = first node's start to last one's "
              "end in the profiles run; non-dict = profile rows outside the d_* dictionaries (which do not grow); "
              "GiB = warehouse on disk after the build. Slowest profile nodes at the largest factor: "
              + ", ".join(f"{n} {s}s" for n, s in rows[-1]["profiles"]["slowest"]))
    print(json.dumps({"with_tests": options.with_tests, "with_eicu": options.with_eicu, "skipped": skipped,
                      "load_average": [round(load_before, 2), round(os.getloadavg()[0], 2)],
                      "factors": _rounded(rows)}))


if __name__ == "__main__":
    main()
