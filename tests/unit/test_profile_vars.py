"""The typed dbt vars of a build (ProfileVars) and the template databases' profiles (PROFILE_OF): named fields, and
exactly the dict dbt and the manifest have always been given."""

from __future__ import annotations

import json

import pytest

from ehrbench.profiles import BenchmarkDatabase, ProfileVars, profile_vars
from ehrbench.questions.templates import DATABASES, PROFILE_OF


@pytest.mark.parametrize(("seed", "preset", "overrides"), [
    (0, "ehrchatqa", {}),
    (7, "ehrsql2022", {"current_time": "2106-06-30 12:00:00", "time_span": None}),
    (3, "ehrchatqa", {"start_year": 2150, "time_span": 4, "current_time": "2160-01-01 00:00:00"}),
])
def test_the_typed_vars_give_dbt_exactly_todays_dict(seed, preset, overrides):
    typed = ProfileVars.for_build(seed, preset, **overrides)
    plain = profile_vars(seed, preset, **overrides)
    assert json.dumps(typed.to_dbt_vars()) == json.dumps(plain)  # same keys, order and values: same --vars text
    assert typed.ehrsql2024.current_time == plain["ehrsql2024"]["current_time"]
    assert typed.time_shift("ehrsql_eicu").seed == seed
    assert typed.ehrsql2024.num_patients == 100 and typed.renamed_random == plain["renamed_random"]


def test_the_typed_vars_refuse_what_the_dict_does():
    with pytest.raises(ValueError, match="nowish"):
        ProfileVars.for_build(0, nowish="x")


def test_each_template_database_names_its_profile_database_and_var_group():
    assert set(PROFILE_OF) == set(DATABASES)
    mimic = PROFILE_OF["mimic_iv"]
    assert (mimic.profile, mimic.database, mimic.var_group) == ("ehrsql2024", "mimic_iv", "ehrsql2024")
    assert PROFILE_OF["eicu"].benchmark == BenchmarkDatabase("ehrsql_eicu", "eicu")
    profile, database, _ = PROFILE_OF["eicu"]  # still a tuple for callers that unpack it
    assert (profile, database) == ("ehrsql_eicu", "eicu")
    current = ProfileVars.for_build(0).time_shift(mimic.var_group).current_time
    assert current == "2100-12-31 23:59:00"
