"""The settings every Prefect server of ehrbench's starts with (ehrbench.stack.prefect_server): names Prefect reads,
the same values in the Makefile (make server, the tests and bench scripts it runs), and a user's own value kept."""

from __future__ import annotations

import re
from pathlib import Path

from ehrbench.stack.prefect_server import SERVER_SETTINGS, use_server_settings

REPO = Path(__file__).resolve().parents[2]


def test_prefect_reads_each_setting_as_meant(monkeypatch):
    from prefect.settings import Settings

    for name, value in SERVER_SETTINGS.items():
        monkeypatch.setenv(name, value)
    recorder = Settings().server.services.task_run_recorder  # a misspelt name would be ignored: defaults 1, 1, 5
    assert (recorder.batch_size, recorder.read_batch_size, recorder.flush_interval) == (200, 200, 1.0)


def test_the_makefile_exports_the_same_values():
    exported = dict(re.findall(r"^export (PREFECT_SERVER_\w+) \?= (\S+)$", (REPO / "Makefile").read_text(), re.M))
    assert exported == SERVER_SETTINGS


def test_a_value_the_user_set_stays():
    environ = {"PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_BATCH_SIZE": "50"}
    use_server_settings(environ)
    assert environ == {**SERVER_SETTINGS, "PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_BATCH_SIZE": "50"}
