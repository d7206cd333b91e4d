"""Settings of every Prefect server ehrbench runs: the CLI's temporary one, `make server`'s, the tests' and the bench
scripts'. They reach a server through its environment (Prefect reads them when the server starts).

The task run recorder writes each task run event (pending, running, completed, ...) with its own SQL upsert by
default (batch size 1). A 1,000-trial evaluation is 4,000 of them: on SQLite the temporary server spent 56 s of CPU,
as much as the trials themselves, on two cores they share (bench/evaluate.py). Written in batches of up to 200,
flushed every second, the same rows cost half that; a state shows in the UI at most a second later.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

SERVER_SETTINGS: dict[str, str] = {
    "PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_BATCH_SIZE": "200",
    "PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_READ_BATCH_SIZE": "200",
    "PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_FLUSH_INTERVAL": "1",
}


def use_server_settings(environ: MutableMapping[str, str] = os.environ) -> None:
    """The settings into `environ` for a server started from it; a value already set there is the user's and stays."""
    for name, value in SERVER_SETTINGS.items():
        environ.setdefault(name, value)
