"""The named parameter sets of the ehrsql_eicu profile and the --vars dict built from them."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ehrbench.profiles import EICU_PRESETS, eicu_vars

REPO = Path(__file__).resolve().parents[2]


def test_default_is_ehrchatqa():
    """EHR-ChatQA's time shift: every patient, not de-identified."""
    assert eicu_vars() == {"ehrsql_eicu": {"current_time": "2100-12-31 23:59:00", "start_year": 2100,
                                           "time_span": 0, "seed": 0, "num_patients": None, "current_ratio": 0.0,
                                           "deidentify": False}}


def test_ehrsql2022_preset():
    """EHRSQL's README: preprocess_db.py --deid --timeshift --current_time "2105-12-31 23:59:00" --start_year 2100
    --time_span 5 --cur_patient_ratio 0.1 (and the default --num_patient 1000)."""
    params = eicu_vars("ehrsql2022")["ehrsql_eicu"]
    assert params == {"current_time": "2105-12-31 23:59:00", "start_year": 2100, "time_span": 5, "seed": 0,
                      "num_patients": 1000, "current_ratio": 0.1, "deidentify": True}


def test_overrides_replace_single_keys_and_leave_presets_alone():
    params = eicu_vars("ehrsql2022", seed=7)["ehrsql_eicu"]
    assert params["seed"] == 7 and params["time_span"] == 5
    assert EICU_PRESETS["ehrsql2022"]["seed"] == 0


def test_dbt_project_default_matches_the_ehrchatqa_preset():
    project = yaml.safe_load((REPO / "dbt_project" / "dbt_project.yml").read_text())
    assert project["vars"]["ehrsql_eicu"] == EICU_PRESETS["ehrchatqa"]


@pytest.mark.parametrize("preset, overrides, message", [
    ("mimic", {}, "unknown eICU preset"),
    ("ehrchatqa", {"num_patient": 10}, "unknown ehrsql_eicu parameter"),
    ("ehrsql2022", {"num_patients": 0}, "num_patients must be a positive integer or None"),
    ("ehrsql2022", {"current_ratio": 1.5}, r"current_ratio must be a number in \[0, 1\]"),
    ("ehrsql2022", {"deidentify": "yes"}, "deidentify must be true or false"),
    ("ehrchatqa", {"seed": "1"}, "seed must be an integer"),
    ("ehrchatqa", {"time_span": -1}, ">= 0"),
    ("ehrchatqa", {"current_time": "2100-12-31"}, "YYYY-MM-DD HH:MM:SS"),
    ("ehrchatqa", {"current_time": "2099-12-31 23:59:00"}, "before start_year"),
])
def test_bad_parameters_are_refused(preset, overrides, message):
    with pytest.raises(ValueError, match=message):
        eicu_vars(preset, **overrides)


def test_profile_vars_default_is_the_published_constants_for_both_databases():
    from ehrbench.profiles import profile_vars

    dbt_vars = profile_vars(seed=0)
    for name in ("ehrsql2024", "ehrsql_eicu"):
        assert dbt_vars[name]["current_time"] == "2100-12-31 23:59:00"
        assert dbt_vars[name]["start_year"] == 2100 and dbt_vars[name]["time_span"] == 0
        assert dbt_vars[name]["seed"] == 0
    assert dbt_vars["ehrsql2024"]["num_patients"] == 100 and dbt_vars["ehrsql2024"]["current_ratio"] == 0.1


def test_profile_vars_seed_and_time_overrides_reach_every_profile():
    from ehrbench.profiles import profile_vars

    dbt_vars = profile_vars(seed=7, eicu_preset="ehrsql2022", current_time="2106-06-30 12:00:00", time_span=None)
    assert dbt_vars["ehrsql2024"]["seed"] == dbt_vars["ehrsql_eicu"]["seed"] == 7
    assert dbt_vars["ehrsql2024"]["current_time"] == dbt_vars["ehrsql_eicu"]["current_time"] == "2106-06-30 12:00:00"
    assert dbt_vars["ehrsql_eicu"]["time_span"] == 5  # None keeps the preset's value
    with pytest.raises(ValueError, match="nowish"):
        profile_vars(seed=0, nowish="x")


def test_benchmark_database_names_one_schema_and_two_files(tmp_path):
    from ehrbench.profiles import BENCHMARK_DATABASES, BenchmarkDatabase

    db = BenchmarkDatabase("renamed", "eicu")
    assert db.schema == "renamed__eicu" and db.key == "renamed/eicu"
    assert db.files(tmp_path) == (tmp_path / "db/renamed/eicu.duckdb", tmp_path / "db/renamed/eicu.sqlite")
    assert len({d.schema for d in BENCHMARK_DATABASES}) == len(BENCHMARK_DATABASES)


def test_profile_vars_carry_the_random_rename_drawn_with_the_build_seed():
    from ehrbench.profiles import profile_vars, schema_renames
    from ehrbench.renaming import published_rename

    drawn = profile_vars(seed=3)["renamed_random"]
    assert drawn == profile_vars(seed=3)["renamed_random"]
    assert drawn != profile_vars(seed=4)["renamed_random"]
    for database in ("mimic_iv", "eicu"):
        published = published_rename(database)
        # the dbt var renames the renamed profile's tables; the hidden map goes from the EHRSQL schema to the same names
        assert set(drawn[database]) == {table.target for table in published.tables}
        composed = schema_renames(3)[f"renamed_random/{database}"]
        for table in published.tables:
            var_entry = drawn[database][table.target]
            assert composed.table(table.source).target == var_entry["name"]
            for source_column, renamed_column in table.columns:
                assert composed.table(table.source).column(source_column) == var_entry["columns"][renamed_column]


def test_profile_selection_builds_the_rename_seed_every_profile_and_the_lineage():
    from ehrbench.profiles import BENCHMARK_DATABASES, LINEAGE_MODELS, PROFILE_SELECTION

    assert PROFILE_SELECTION[0] == "ehrchatqa_rename_map" and PROFILE_SELECTION[-1] == "lineage"
    assert set(PROFILE_SELECTION[1:-1]) == {db.profile for db in BENCHMARK_DATABASES}
    assert set(LINEAGE_MODELS) == {db.key for db in BENCHMARK_DATABASES}
