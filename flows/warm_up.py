"""Slow imports done ahead of the stages that need them, while a build's first stages leave a core idle.

Ingest and transform run one at a time in the flow's process, mostly on one core, and the transform imports dbt
(~1.2 s) as it starts. A thread imports it during the ingest instead (its DuckDB reads release the GIL); `ehrbench
build` starts that thread even earlier, while it waits ~3 s for its temporary Prefect server, whose start-up takes one
core. The stage workers (flows/stage_workers.py) start at the same time and import what their stages will load (~3 s
each: Great Expectations for validate, which runs in one of them next, ~1.7 s of it), rather than as the databases
stage's dbt run keeps the other core busy.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Sequence

from ehrbench.garbage_collection import keep_what_is_loaded

# What the flow's own process imports in the background: the transform stage's dbt. Not Great Expectations: the
# validate stage runs in a stage worker, so this process never holds it (~130 MiB for the whole build).
FLOW_IMPORTS = ("dbt.cli.main",)
# What each stage worker imports as it starts: the stage flows, and Great Expectations, which validate runs on and
# noteqa and questions import only when they validate (~1.7 s, ~140 MiB). Not ACES and scikit-learn (meds alone uses
# them, 0.5 s): in the worker that runs fhir they held ~60 MiB more for nothing, and at x100 the build's processes
# peak near 8 GiB.
WORKER_IMPORTS = ("flows.validate", "flows.dq", "flows.noteqa", "flows.meds_export", "flows.fhir_view",
                  "flows.questions", "great_expectations")


def import_modules(modules: Sequence[str]) -> None:
    """Import each module; one that fails to import is left for its stage, which then reports the error itself."""
    for module in modules:
        try:
            importlib.import_module(module)
        except Exception:  # noqa: BLE001, S112 — the stage that needs it raises the same error where it belongs
            continue


def import_in_background(modules: Sequence[str] = FLOW_IMPORTS) -> threading.Thread:
    """Start importing `modules` in a daemon thread; a stage that imports one of them meanwhile waits for it (Python's
    import lock), so nothing runs half-imported. The process's garbage collector then no longer walks what is loaded
    (ehrbench.garbage_collection)."""
    modules = tuple(modules)

    def import_and_keep() -> None:
        import_modules(modules)
        keep_what_is_loaded()

    thread = threading.Thread(target=import_and_keep, name="ehrbench-warm-up", daemon=True)
    thread.start()
    return thread
