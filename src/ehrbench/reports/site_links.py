"""The site's page names and relative links: where a page of an agent, a suite or a task lives in the site, and
which paths stay inside it."""

from __future__ import annotations

import hashlib
import re
from pathlib import PurePosixPath


def page_name(text: str) -> str:
    """A filesystem-safe page name; the hash keeps names apart that sanitise alike (`llm:m@http://h/v1` and
    `llm_m_http_h_v1`)."""
    readable = re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")[:60]
    return f"{readable}-{hashlib.sha1(text.encode('utf-8')).hexdigest()[:8]}"


def failures_href(agent: str, suite: str) -> str:
    """The failing-tasks page of an agent on a suite, relative to the site root."""
    return f"failures/{page_name(agent)}--{suite}.html"


def task_href(suite: str, task_id: str) -> str:
    """A task's page, relative to the site root."""
    return f"tasks/{suite}/{page_name(task_id)}.html"


def site_relative(path: str) -> PurePosixPath | None:
    """A relative path inside the site, or None for absolute paths and paths that climb out of it."""
    relative = PurePosixPath(path.replace("\\", "/"))
    if relative.is_absolute() or ".." in relative.parts or not relative.parts:
        return None
    return relative
