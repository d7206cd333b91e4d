"""The garbage collector of a process that runs a flow: larger batches, and no full collection as it exits."""

import subprocess
import sys

# A reference cycle that is garbage from the start and small enough for no collection to find it before the exit:
# only the collection Python makes as the process ends would finalize it.
CYCLE_LEFT_FOR_THE_EXIT = """
import gc
class Noisy:
    def __del__(self):
        print("collected at exit", flush=True)
gc.disable()
noisy = Noisy()
noisy.self = noisy
del noisy
{tune}
print(list(gc.get_threshold()))
"""


def _run(tune: str) -> list[str]:
    out = subprocess.run([sys.executable, "-c", CYCLE_LEFT_FOR_THE_EXIT.format(tune=tune)], capture_output=True,
                         text=True, check=True, timeout=60)
    return out.stdout.splitlines()


def test_without_tuning_python_collects_the_cycle_as_it_exits():
    assert _run("") == ["[700, 10, 10]", "collected at exit"]


def test_a_long_run_collects_in_larger_batches_and_skips_the_collection_at_exit():
    lines = _run("from ehrbench.garbage_collection import tune_for_a_long_run\ntune_for_a_long_run()")
    assert lines == ["[10000, 10, 10]"]
