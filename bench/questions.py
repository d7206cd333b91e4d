"""Question generation throughput on a published build: questions generated (gold SQL executed in DuckDB and
in the exported SQLite) and validated (Great Expectations suite) per second, and the stage's share of the build.

    uv run python bench/questions.py [--build latest|<id>|<folder>] [--per-template N] [--data-dir DIR]

Reads the build's agent-facing databases (read-only) and manifest; writes nothing into the build (Data Docs go to
a temporary folder). Prints one line, then a JSON line.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from ehrbench.layout import BuildLayout, DataLayout
from ehrbench.questions.check import build_databases
from ehrbench.questions.generate import GenerationSettings, generate_questions
from ehrbench.questions.paraphrase import OfflineParaphraser, paraphrase_questions
from ehrbench.questions.templates import DATABASES, load_templates
from ehrbench.settings import default_data_dir
from ehrbench.validation.questions import validate_questions

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default="latest")
    parser.add_argument("--per-template", type=int, default=5)
    parser.add_argument("--data-dir", type=Path, default=default_data_dir())
    options = parser.parse_args()
    folder = DataLayout(root=options.data_dir.resolve()).build_folder(options.build)
    if not BuildLayout(folder).manifest.is_file():
        raise SystemExit(f"no published build at {folder} (--build, --data-dir); run `make build` first")
    manifest = json.loads(BuildLayout(folder).manifest.read_text())
    templates = load_templates()

    started = time.perf_counter()
    questions = []
    for database in DATABASES:
        duckdb_path, sqlite_path, now = build_databases(folder, database)
        questions += generate_questions(templates, database, duckdb_path, sqlite_path, now,
                                        GenerationSettings(per_template=options.per_template))
    generate_s = time.perf_counter() - started

    started = time.perf_counter()
    paraphrase_questions(questions, OfflineParaphraser({t.id: t for t in templates}))
    paraphrase_s = time.perf_counter() - started

    import great_expectations  # noqa: F401  (import time is start-up, not validation)

    with tempfile.TemporaryDirectory() as docs:
        started = time.perf_counter()
        validation = validate_questions([q.to_dict() for q in questions], REPO / "expectations" / "questions.json",
                                        databases=DATABASES, data_docs_dir=Path(docs))
        validate_s = time.perf_counter() - started

    stages = {name: stage["seconds"] for name, stage in manifest.get("stages", {}).items()}
    total = sum(stages.values())
    result = {"build": folder.name, "templates": len(templates), "questions": len(questions),
              "generate_s": round(generate_s, 2), "generated_per_s": round(len(questions) / generate_s, 1),
              "paraphrase_s": round(paraphrase_s, 3), "validate_s": round(validate_s, 2),
              "validated_per_s": round(len(questions) / validate_s, 1), "quarantined": validation.quarantined_count,
              "build_stage_s": stages, "questions_stage_share": round(stages["questions"] / total, 3)
              if "questions" in stages and total else None}
    share = result["questions_stage_share"]
    print(f"{len(questions):,} questions from {len(templates)} templates: generated in {result['generate_s']} s "
          f"({result['generated_per_s']}/s, gold SQL run in DuckDB and SQLite), validated in {result['validate_s']} s "
          f"({result['validated_per_s']}/s, {validation.quarantined_count} quarantined); questions stage "
          + (f"{share:.0%} of the build's {total:.0f} s" if share is not None else "not in this build's manifest"),
          flush=True)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
