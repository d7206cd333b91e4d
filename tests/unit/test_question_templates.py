"""Template files: the loader's checks name the file and template; the package's templates all load; filling a
template gives the question text and SQL its slots say."""

from datetime import datetime

import numpy as np
import pytest

from ehrbench.questions.dialects import UntranspilableSql, to_sqlite
from ehrbench.questions.instantiate import InstantiationError, instantiate, sql_literal
from ehrbench.questions.templates import CATEGORIES, DATABASES, Template, TemplateError, load_templates

NOW = datetime(2100, 12, 31, 23, 59)

LAB = """
- id: lab_value_exact
  category: labs
  question: What was the {exact} {lab_name} value of patient {patient_id} {time}?
  phrasings:
    - Tell me the {exact} {lab_name} value of patient {patient_id} {time}.
    - What {exact} {lab_name} value did patient {patient_id} have {time}?
    - The {exact} {lab_name} value of patient {patient_id} {time}?
  time:
    exact: [exact-first]
    time: [absolute]
  values:
    mimic_iv: select subject_id as patient_id, label as lab_name, charttime as anchor_time from labs
  sql:
    mimic_iv: >
      select valuenum from labevents where subject_id = {{ patient_id }} and label = {{ lab_name }}
      {{ time.on('labevents.charttime') }} {{ exact.order('labevents.charttime') }}
"""


def _write(tmp_path, text):
    (tmp_path / "labs.yaml").write_text(text)
    return tmp_path


def test_a_template_fills_its_question_and_sql(tmp_path):
    (template,) = load_templates(_write(tmp_path, LAB))
    row = {"patient_id": 10009628, "lab_name": "potassium's", "anchor_time": datetime(2100, 11, 5, 6, 0)}
    instance = instantiate(template, "mimic_iv", row, np.random.default_rng(0), NOW)
    assert instance.times["time"].kind.startswith("abs-")
    assert instance.question.startswith("What was the first potassium's value of patient 10009628 ")
    assert instance.times["time"].text in instance.question
    assert "subject_id = 10009628 and label = 'potassium''s'" in instance.sql
    assert instance.sql.endswith("ORDER BY labevents.charttime ASC LIMIT 1")
    assert instance.slot_texts["lab_name"] == "potassium's"
    assert instance.slot_texts["exact"] == "first"


def test_the_question_has_no_double_spaces_when_a_time_slot_is_empty(tmp_path):
    (template,) = load_templates(_write(tmp_path, LAB.replace("time: [absolute]", "time: [none]")))
    instance = instantiate(template, "mimic_iv", {"patient_id": 1, "lab_name": "sodium", "anchor_time": None},
                           np.random.default_rng(0), NOW)
    assert instance.question == "What was the first sodium value of patient 1?"
    assert "AND" not in instance.sql


@pytest.mark.parametrize(("change", "message"), [
    (("{exact} {lab_name} value did", "{lab_name} value did"), "phrasing .* has slots"),
    (("Tell me the {exact} {lab_name}", "Tell me the {lab_name} {exact}"), "same slots, same order"),
    (("exact: [exact-first]", "exact: [exact-third]"), "unknown exact kind"),
    (("time: [absolute]", "time: [sometimes]"), "unknown global kind"),
    (("category: labs", "category: labs\n  operators: [median]"), "unknown operator slot"),
    (("    mimic_iv: select subject_id", "    mimic: select subject_id"), "unknown database"),
    (("id: lab_value_exact", "id: Lab-Value"), "snake_case"),
])
def test_bad_templates_are_refused_naming_file_template_and_field(tmp_path, change, message):
    with pytest.raises(TemplateError, match=message) as raised:
        load_templates(_write(tmp_path, LAB.replace(*change)))
    assert "labs.yaml" in str(raised.value)
    assert "lab_value_exact" in str(raised.value) or "Lab-Value" in str(raised.value)


def test_duplicate_ids_across_files_are_refused(tmp_path):
    _write(tmp_path, LAB)
    (tmp_path / "more.yaml").write_text(LAB)
    with pytest.raises(TemplateError, match="also used in"):
        load_templates(tmp_path)


def test_a_values_query_must_return_every_value_slot(tmp_path):
    (template,) = load_templates(_write(tmp_path, LAB))
    with pytest.raises(InstantiationError, match="lab_name"):
        instantiate(template, "mimic_iv", {"patient_id": 1}, np.random.default_rng(0), NOW)


def test_sql_literals_quote_text_and_keep_numbers():
    assert sql_literal("o'neil") == "'o''neil'"
    assert sql_literal(np.int64(7)) == "7"
    assert sql_literal(2.5) == "2.5"
    assert sql_literal(None) == "NULL"


def test_dialect_rewrites_what_sqlite_lacks():
    assert to_sqlite("select (epoch(TIMESTAMP '2100-12-31 23:59:00') - epoch(t.x)) / 86400 from t") == (
        "SELECT CAST((CAST(STRFTIME('%s', '2100-12-31 23:59:00') AS INTEGER) - CAST(STRFTIME('%s', t.x) AS INTEGER))"
        " AS REAL) / 86400 FROM t")
    with pytest.raises(UntranspilableSql, match="HOUR"):
        to_sqlite("select date_trunc('hour', t.x) from t")


def test_the_packaged_templates_load_and_cover_the_databases():
    templates = load_templates()
    assert templates, "no packaged templates"
    assert {t.category for t in templates} <= set(CATEGORIES) | {t.category for t in templates if not t.answerable}
    for template in templates:
        assert set(template.sql) <= set(DATABASES)


def test_unanswerable_templates_have_no_sql(tmp_path):
    text = LAB.replace("category: labs", "category: labs\n  answerable: false")
    with pytest.raises(TemplateError, match="unanswerable template has no `sql`"):
        load_templates(_write(tmp_path, text))
    assert Template  # the model is importable for helpers building templates in code
