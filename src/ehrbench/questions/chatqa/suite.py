"""What every chatqa task shares: the suite name, the profile its databases are built under, the timeout of one gold
query, and how a task id is derived."""

from __future__ import annotations

import hashlib

SUITE = "chatqa"
RENAMED_PROFILE = "renamed"
TIMEOUT_S = 10.0


def _task_id(task_type: str, key: str) -> str:
    return hashlib.sha1(f"{SUITE}|{task_type}|{key}".encode()).hexdigest()[:24]
