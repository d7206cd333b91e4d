"""The databases stage's two dbt runs (ehrbench.side_stages) build exactly what its one run built: `dbt ls` on the real
project lists the models and tests of the one run and of each of the two, and the side stages' copy of their inputs
(ehrbench.warehouse.copy_relations) holds the rows they read, views included."""

from __future__ import annotations

import json

import duckdb
import pytest

from ehrbench.errors import MissingInputError
from ehrbench.fhir.export import fhir_selection
from ehrbench.profiles import PROFILE_SELECTION, ProfileVars
from ehrbench.side_stages import profiles_command, side_models, side_models_command
from ehrbench.transform import PROJECT_DIR, _dbt_environment
from ehrbench.warehouse import copy_relations


def listed(command: list[str], tmp_path) -> dict[str, dict]:
    """unique_id -> node of what `dbt ls` selects with the build's selection arguments of `command`."""
    from dbt.cli.main import dbtRunner

    arguments = command[1:]  # "build" → "ls", the selection as given
    vars_ = ProfileVars.for_build(0).with_dq(0, 100).to_dbt_vars()
    with _dbt_environment(tmp_path / "warehouse.duckdb"):
        result = dbtRunner().invoke(
            ["ls", *arguments, "--project-dir", str(PROJECT_DIR), "--profiles-dir", str(PROJECT_DIR),
             "--target-path", str(tmp_path / "target"), "--log-path", str(tmp_path / "logs"),
             "--vars", json.dumps(vars_), "--output", "json", "--log-level", "none"])
    assert result.success, result.exception
    return {node["unique_id"]: node for node in map(json.loads, result.result)}


@pytest.mark.integration
@pytest.mark.parametrize("notes_source", ["synthetic", "mimic_iv_note"])
def test_the_two_runs_build_the_models_and_tests_of_the_one_they_replace(notes_source, tmp_path):
    downstream = fhir_selection(True)
    one = listed(["build", "--select", *PROFILE_SELECTION, *downstream, *side_models(notes_source)], tmp_path)
    side = listed(side_models_command(notes_source), tmp_path)
    profiles = listed(profiles_command(downstream, notes_source), tmp_path)

    for kind in ("model", "test", "seed"):
        of = {name: {k for k, node in nodes.items() if node["resource_type"] == kind}
              for name, nodes in (("one", one), ("side", side), ("profiles", profiles))}
        assert not of["side"] & of["profiles"], kind  # nothing built twice
        assert of["side"] | of["profiles"] == of["one"], kind  # nothing lost, nothing added
    assert any(k.startswith("model.ehrbench.dq__") for k in side) and any(".meds__" in k for k in side)
    # the side run's tests read only what it builds or what was built before it (staging)
    for node in (n for n in side.values() if n["resource_type"] == "test"):
        for parent in node["depends_on"]["nodes"]:
            assert parent in side or parent.startswith(("model.ehrbench.stg_", "source.")), (node["unique_id"], parent)


def test_the_copy_holds_whole_schemas_single_tables_and_views_rows(tmp_path):
    warehouse, copy = tmp_path / "warehouse.duckdb", tmp_path / "copy.duckdb"
    with duckdb.connect(str(warehouse)) as con:
        con.execute("create schema a; create schema b; create schema c")
        con.execute("create table a.one as select * from range(3) t(n)")
        con.execute("create view a.doubled as select n * 2 as n from warehouse.a.one")  # as dbt names it
        con.execute("create table b.kept as select 'x' as v; create table b.left_out as select 1 as v")
        con.execute("create table c.other as select 1 as v")
    counts = copy_relations(warehouse, copy, ["a", "b.kept"])
    assert counts == {"a.doubled": 3, "a.one": 3, "b.kept": 1}
    with duckdb.connect(str(copy), read_only=True) as con:
        assert con.execute("select list(n order by n) from a.doubled").fetchone()[0] == [0, 2, 4]
        tables = con.execute("select table_schema || '.' || table_name, table_type from information_schema.tables "
                             "order by 1").fetchall()
    assert tables == [("a.doubled", "BASE TABLE"), ("a.one", "BASE TABLE"), ("b.kept", "BASE TABLE")]

    with pytest.raises(MissingInputError, match=r"no b\.absent"):
        copy_relations(warehouse, copy, ["a", "b.absent"])
    assert not copy.exists()  # no half-made copy left for a stage to read
