"""Confinement for what agents run: their SQL on the agent-facing database (sql.py, in a worker process), their
Python over retrieved resources (python.py) and a terminal agent's shell commands in its workspace (shell.py). All
run under the operating system's isolation (bubblewrap.py), with resource limits and bounded results; agent Python
also under an audit hook (audit_hook.py) as a second layer.

Hidden gold files sit next to the databases in a build folder, so none may read other files, write (but in its
scratch folder or workspace), signal another process, reach the network, or run without bounds on time, rows, bytes
and memory.
"""

from ehrbench.agents.sandbox.bubblewrap import SandboxUnavailable, isolation, unavailable_reason
from ehrbench.agents.sandbox.python import PythonResult, run_python
from ehrbench.agents.sandbox.shell import ShellResult, run_shell
from ehrbench.agents.sandbox.sql import QueryResult, SqlError, SqlSandbox, close_idle_workers

__all__ = ["PythonResult", "QueryResult", "SandboxUnavailable", "ShellResult", "SqlError", "SqlSandbox",
           "close_idle_workers", "isolation", "run_python", "run_shell", "unavailable_reason"]
