"""EHRSQL-2024 profile support: scoring (published comparison) and the seeded draws of the build."""

from ehrbench.ehrsql.scoring import answers_match, format_answer, format_cell, prepare_gold_sql

__all__ = ["answers_match", "format_answer", "format_cell", "prepare_gold_sql"]
