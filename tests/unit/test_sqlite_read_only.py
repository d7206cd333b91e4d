"""Exported SQLite databases are read (gold queries, chatqa tasks) through `open_sqlite_read_only`: read-only, and
memory-mapped up to SQLITE_MMAP_BYTES."""

from __future__ import annotations

import sqlite3

import pytest

from ehrbench.warehouse import SQLITE_MMAP_BYTES, open_sqlite_read_only


@pytest.fixture
def exported(tmp_path):
    path = tmp_path / "mimic_iv.sqlite"
    with sqlite3.connect(path) as con:
        con.execute("create table patients (subject_id integer, gender text)")
        con.executemany("insert into patients values (?, ?)", [(1, "F"), (2, "M")])
    con.close()
    return path


def test_reads_the_file_memory_mapped(exported):
    con = open_sqlite_read_only(exported)
    assert con.execute("select count(*) from patients").fetchone() == (2,)
    assert con.execute("pragma mmap_size").fetchone() == (SQLITE_MMAP_BYTES,)  # SQLite's default is 0: no mapping
    con.close()


def test_writes_nothing(exported):
    con = open_sqlite_read_only(exported)
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        con.execute("delete from patients")
    con.close()
    with sqlite3.connect(exported) as check:
        assert check.execute("select count(*) from patients").fetchone() == (2,)
    check.close()


def test_a_connection_for_other_threads_only_when_asked(exported):
    import threading

    seen = {}
    for shared in (False, True):
        con = open_sqlite_read_only(exported, check_same_thread=not shared)

        def query(con=con, shared=shared):
            try:
                seen[shared] = con.execute("select 1").fetchone()
            except sqlite3.ProgrammingError:
                seen[shared] = "refused"

        worker = threading.Thread(target=query)
        worker.start()
        worker.join()
        con.close()
    assert seen == {False: "refused", True: (1,)}


def test_a_path_with_uri_characters_opens_that_file(tmp_path):
    folder = tmp_path / "build?v=1#x"  # a bare 'file:' URI would read '?v=1' as its query and '#x' as a fragment
    folder.mkdir()
    path = folder / "eicu.sqlite"
    with sqlite3.connect(path) as con:
        con.execute("create table patient (uniquepid text)")
        con.execute("insert into patient values ('002-1')")
    con.close()
    reader = open_sqlite_read_only(path)
    assert reader.execute("select uniquepid from patient").fetchall() == [("002-1",)]
    reader.close()
