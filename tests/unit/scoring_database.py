"""The small SQLite database the EHRSQL conformance tests execute their crafted gold and predicted SQL on: values
picked to show each published comparison rule (a REAL stored as 94.0, one with five decimals, a NULL, 100 and 150
rows for the first-100-rows rules)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable


def scoring_database() -> Callable[[str], list[tuple]]:
    """An `execute(sql) -> rows` over a fresh in-memory database."""
    con = sqlite3.connect(":memory:", check_same_thread=False)
    con.executescript("""
        CREATE TABLE t (id INTEGER, name TEXT, val REAL);
        INSERT INTO t VALUES (1, 'aspirin', 94.0), (2, 'heparin', 7.42356), (3, 'insulin', NULL);
        CREATE TABLE big (name TEXT);
        CREATE TABLE nums (n INTEGER);
    """)
    con.executemany("INSERT INTO big VALUES (?)", [(f"a{i:03d}",) for i in range(100)])
    con.executemany("INSERT INTO nums VALUES (?)", [(i,) for i in range(150)])
    return lambda sql: con.execute(sql).fetchall()
