"""The synonym vocabulary and the seeded random renames drawn from it (profile `renamed_random`)."""

from __future__ import annotations

import re

import duckdb
import pytest

from ehrbench.renaming import SchemaRename, TableRename, draw_random_rename, load_vocabulary, published_rename

DATABASES = ("mimic_iv", "eicu")
SEEDS = range(51)
IDENTIFIER = re.compile(r"[a-z][a-z0-9_]*")

# https://www.sqlite.org/lang_keywords.html
_SQLITE_KEYWORD_LIST = """
abort action add after all alter always analyze and as asc attach autoincrement before begin between by cascade
case cast check collate column commit conflict constraint create cross current current_date current_time
current_timestamp database default deferrable deferred delete desc detach distinct do drop each else end escape
except exclude exclusive exists explain fail filter first following for foreign from full generated glob group
groups having if ignore immediate in index indexed initially inner insert instead intersect into is isnull join key
last left like limit match materialized natural no not nothing notnull null nulls of offset on or order others
outer over partition plan pragma preceding primary query raise range recursive references regexp reindex release
rename replace restrict returning right rollback row rows savepoint select set table temp temporary then ties to
transaction trigger unbounded union unique update using vacuum values view virtual when where window with without
"""
SQLITE_KEYWORDS = set(_SQLITE_KEYWORD_LIST.split())


@pytest.fixture(scope="module")
def keywords() -> set[str]:
    duckdb_keywords = {name for (name,) in duckdb.sql("select keyword_name from duckdb_keywords()").fetchall()}
    return SQLITE_KEYWORDS | {name.lower() for name in duckdb_keywords}


@pytest.fixture(scope="module")
def vocabulary():
    return load_vocabulary()


@pytest.mark.parametrize("database", DATABASES)
def test_vocabulary_covers_every_renamed_table_and_column(vocabulary, database):
    rename = published_rename(database)
    entry = vocabulary[database]
    targets = [table.target for table in rename.tables]
    columns = {column for table in rename.tables for _, column in table.columns}
    assert set(entry["tables"]) == set(targets)
    assert set(entry["columns"]) == columns
    assert all(len(synonyms) >= 4 for synonyms in entry["tables"].values())
    assert all(len(synonyms) >= 3 for synonyms in entry["columns"].values())


@pytest.mark.parametrize("database", DATABASES)
def test_synonyms_are_plain_identifiers_and_no_keywords(vocabulary, keywords, database):
    synonyms = [s for kind in ("tables", "columns") for entry in vocabulary[database][kind].values() for s in entry]
    assert [s for s in synonyms if not IDENTIFIER.fullmatch(s) or len(s) > 40] == []
    assert sorted({s for s in synonyms if s in keywords}) == []


@pytest.mark.parametrize("database", DATABASES)
def test_synonyms_never_name_something_else_of_the_schema(vocabulary, database):
    """A synonym is listed once per database and is none of the map's source or target names, so a drawn name
    can neither clash with another concept nor fall back to an original EHRSQL name."""
    rename = published_rename(database)
    schema_names = {name for table in rename.tables for name in (table.source, table.target)}
    schema_names |= {name for table in rename.tables for pair in table.columns for name in pair}
    listed = [
        (kind, key, synonym)
        for kind in ("tables", "columns")
        for key, synonyms in vocabulary[database][kind].items()
        for synonym in synonyms
    ]
    seen: dict[str, tuple[str, str]] = {}
    repeated = []
    for kind, key, synonym in listed:
        if synonym in seen:
            repeated.append((synonym, seen[synonym], (kind, key)))
        seen[synonym] = (kind, key)
    assert repeated == []
    assert sorted({synonym for _, _, synonym in listed} & schema_names) == []


@pytest.mark.parametrize("database", DATABASES)
def test_same_seed_draws_the_same_rename(database):
    base = published_rename(database)
    for seed in SEEDS:
        assert draw_random_rename(base, seed).to_dict() == draw_random_rename(base, seed).to_dict()


@pytest.mark.parametrize("database", DATABASES)
def test_different_seeds_draw_different_table_names(database):
    base = published_rename(database)
    table_sets = {tuple(t.target for t in draw_random_rename(base, seed).tables) for seed in SEEDS}
    assert len(table_sets) == len(SEEDS)


@pytest.mark.parametrize("database", DATABASES)
def test_draws_keep_join_keys_consistent_and_names_unique(vocabulary, database):
    base = published_rename(database)
    for seed in SEEDS:
        drawn = draw_random_rename(base, seed)
        targets = [t.target for t in drawn.tables]
        assert len(set(targets)) == len(targets)
        synonym_of: dict[str, str] = {}
        for base_table, table in zip(base.tables, drawn.tables, strict=True):
            assert [source for source, _ in table.columns] == [target for _, target in base_table.columns]
            assert table.target in vocabulary[database]["tables"][table.source]
            names = [target for _, target in table.columns]
            assert len(set(names)) == len(names)
            for source, target in table.columns:
                assert target in vocabulary[database]["columns"][source]
                assert synonym_of.setdefault(source, target) == target  # e.g. patientid: one name everywhere


def test_the_foreign_key_gets_the_same_name_in_every_table():
    drawn = draw_random_rename(published_rename("mimic_iv"), seed=11)
    names = {t.column("patientid") for t in drawn.tables if t.has_column("patientid")}
    assert len(names) == 1
    assert len([t for t in drawn.tables if t.has_column("patientid")]) == 13


def test_composed_with_the_published_map_it_renames_ehrsql_names_directly():
    published = published_rename("eicu")
    drawn = draw_random_rename(published, seed=5)
    composed = published.then(drawn)
    assert composed.table("patient").target == drawn.table("icupatient").target
    assert composed.table("vitalperiodic").column("heartrate") == drawn.table("vital_signs").column("heart_rate")
    assert SchemaRename.from_dict(composed.to_dict()) == composed


BASE = SchemaRename("toy", (
    TableRename("a", "stays", (("t", "start"), ("k", "stay_key"))),
    TableRename("b", "labs", (("k", "stay_key"), ("v", "value"))),
))


def test_a_taken_synonym_falls_through_to_the_next_one():
    # `start` (drawn first) can only be "begin", so `stay_key`, which shares table `stays`, never gets it
    vocabulary = {"toy": {
        "tables": {"stays": ["visits", "episodes"], "labs": ["results", "tests"]},
        "columns": {"start": ["begin"], "stay_key": ["begin", "visit_key"], "value": ["measurement", "reading"]},
    }}
    for seed in range(20):
        drawn = draw_random_rename(BASE, seed, vocabulary)
        assert drawn.table("stays").columns == (("start", "begin"), ("stay_key", "visit_key"))
        assert drawn.table("labs").column("stay_key") == "visit_key"


def test_a_draw_where_every_synonym_is_taken_fails():
    vocabulary = {"toy": {
        "tables": {"stays": ["visits"], "labs": ["visits"]},
        "columns": {"stay_key": ["key1"], "start": ["t1"], "value": ["v1"]},
    }}
    with pytest.raises(ValueError, match="table 'labs' collides.*visits"):
        draw_random_rename(BASE, 0, vocabulary)


def test_missing_vocabulary_entries_are_named():
    vocabulary = {"toy": {"tables": {"stays": ["visits"], "labs": ["results"]}, "columns": {"stay_key": ["key"]}}}
    with pytest.raises(ValueError, match="no synonyms for column 'start' of database 'toy'"):
        draw_random_rename(BASE, 0, vocabulary)
    with pytest.raises(ValueError, match="no database 'toy'"):
        draw_random_rename(BASE, 0, {"other": {}})
    with pytest.raises(ValueError, match="no synonyms for table 'stays'"):
        draw_random_rename(BASE, 0, {"toy": {"tables": {}, "columns": {}}})
