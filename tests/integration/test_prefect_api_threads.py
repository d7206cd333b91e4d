"""The CLI's temporary Prefect API is seen by every thread of the CLI's process, not only by the one that started it:
Prefect's own threads (the process pool's message forwarder) otherwise start a second server. Run in a child process
with no Prefect settings, as the CLI runs; a real temporary server."""

import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.integration

CHILD = textwrap.dedent("""
    import json, sys, threading
    from pathlib import Path
    from ehrbench.cli.prefect_runs import prefect_api, use_prefect

    use_prefect(Path(sys.argv[1]))
    from prefect.events.worker import should_emit_events_to_running_server
    from prefect.settings import PREFECT_API_URL

    def seen_by_a_new_thread():
        seen = {}
        def look():
            seen.update(url=PREFECT_API_URL.value(), events_to_server=should_emit_events_to_running_server())
        thread = threading.Thread(target=look)
        thread.start()
        thread.join()
        return seen

    with prefect_api() as api_ready:
        api_ready()
        during = {"main": PREFECT_API_URL.value(), "thread": seen_by_a_new_thread()}
    after = seen_by_a_new_thread()
    print(json.dumps({"during": during, "after": after}))
""")


def test_a_thread_started_by_prefect_sees_the_temporary_server_and_forgets_it_afterwards(tmp_path):
    import json

    env = {k: v for k, v in os.environ.items() if not k.startswith(("EHRBENCH_", "PREFECT_"))}
    env.update(DO_NOT_TRACK="1", PREFECT_HOME=str(tmp_path / "prefect"),
               PREFECT_PROFILES_PATH=str(tmp_path / "profiles.toml"))
    done = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path)], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    server_url = seen["during"]["main"]
    assert server_url.startswith("http://127.0.0.1:") and server_url.endswith("/api")
    assert seen["during"]["thread"] == {"url": server_url, "events_to_server": True}
    assert seen["after"]["url"] is None  # no stale URL of a stopped server for what runs after the command
