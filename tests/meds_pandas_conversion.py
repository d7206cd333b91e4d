"""A MEDS conversion task solved in pandas from its instruction alone, sharing no code with ehrbench: run in a task's
workspace (`python meds_pandas_conversion.py`), it reads event_config.yaml and data/, and writes meds/data/0.parquet.
The tests use it as an independent implementation of the instruction's rules: the verifier must pass it, which shows
the task is solvable as written (and, as the scripted terminal agent's program, that an agent's own code can pass).
"""

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import yaml

PLACEHOLDER = re.compile(r"\{\$(\w+)(?:\s*\?\?\s*'([^']*)')?\}")


def read(table):
    # every value as text; only an empty field is missing
    return pd.read_csv(f"data/{table}.csv.gz", dtype=str, keep_default_na=False, na_values=[""]).astype("string")


def code_of(expression, rows):
    expression = expression.strip()
    if expression.startswith("$"):
        return rows[expression[1:]]
    template = re.fullmatch(r'f"(.*)"', expression)
    if not template:
        return pd.Series(expression.strip('"'), index=rows.index, dtype="string")
    body, position = template.group(1), 0
    code = pd.Series("", index=rows.index, dtype="string")
    for match in PLACEHOLDER.finditer(body):
        value = rows[match.group(1)]
        if match.group(2) is not None:
            value = value.fillna(match.group(2))
        code = code + body[position:match.start()] + value  # a missing value makes the code missing
        position = match.end()
    return code + body[position:]


def arguments(text):
    parts, depth, start = [], 0, 0
    for index, char in enumerate(text):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(text[start:index])
            start = index + 1
    return [*parts, text[start:]]


def time_of(expression, rows):
    expression = expression.strip()
    nested = re.fullmatch(r"coalesce\((.*)\)", expression)
    if nested:
        times = [time_of(part, rows) for part in arguments(nested.group(1))]
        first = times[0]
        for other in times[1:]:
            first = first.fillna(other)
        return first
    year = re.fullmatch(r"\$(\w+)::year", expression)
    if year:
        return pd.to_datetime(rows[year.group(1)] + "-01-01", format="%Y-%m-%d")
    parsed = re.fullmatch(r'\$(\w+)::(\?)?"([^"]*)"', expression)
    return pd.to_datetime(rows[parsed.group(1)], format=parsed.group(3),
                          errors="coerce" if parsed.group(2) else "raise")


def table_rows(table, options):
    rows = read(table)
    for other, join in (options.get("join") or {}).items():
        right = read(other)[[join["key"], *join["cols"]]]
        if join.get("aggregate") == "min":
            right = right.groupby(join["key"], as_index=False).min()
        rows = rows.merge(right, on=join["key"], how="left")
    for column, expression in (options.get("cols") or {}).items():
        a, op, b = re.fullmatch(r"\(?\$(\w+)\s*([-+])\s*\$(\w+)\)?(?:::str)?", expression).groups()
        left, right = rows[a].astype("Int64"), rows[b].astype("Int64")
        rows[column] = (left - right if op == "-" else left + right).astype("string")
    return rows


frames = []
for table, events in yaml.safe_load(Path("event_config.yaml").read_text()).items():
    rows = table_rows(table, events.get("_table") or {})
    for name, event in events.items():
        if name == "_table":
            continue
        static = event["time"] is None
        frame = pd.DataFrame({
            "subject_id": rows["subject_id"].astype("int64"),
            "time": pd.Series(pd.NaT, index=rows.index, dtype="datetime64[us]") if static
            else time_of(event["time"], rows).astype("datetime64[us]"),
            "code": code_of(event["code"], rows),
            "numeric_value": pd.to_numeric(rows[event["numeric_value"][1:]], errors="coerce").astype("float32")
            if "numeric_value" in event else np.float32("nan"),
            "text_value": rows[event["text_value"][1:]] if "text_value" in event else pd.NA,
        })
        keep = frame["code"].notna() & (frame["time"].notna() | static)
        frames.append(frame[keep])

events = pd.concat(frames, ignore_index=True).sort_values(["subject_id", "time"], na_position="first",
                                                           kind="stable")
schema = pa.schema([("subject_id", pa.int64()), ("time", pa.timestamp("us")), ("code", pa.string()),
                    ("numeric_value", pa.float32()), ("text_value", pa.string())])
Path("meds/data").mkdir(parents=True, exist_ok=True)
pq.write_table(pa.Table.from_pandas(events.astype({"code": object, "text_value": object}), schema=schema,
                                    preserve_index=False), "meds/data/0.parquet")
print(f"meds/data/0.parquet: {len(events)} events")
