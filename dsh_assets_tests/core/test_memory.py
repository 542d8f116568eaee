import subprocess
import sys

from dsh_assets.core import duck, memory

HELD_AND_GIVEN_BACK = """
import numpy as np, pyarrow as pa, pyarrow.compute as pc
from dsh_assets.core import memory
def resident_mb():
    return int(open("/proc/self/statm").read().split()[1]) * 4096 // 2 ** 20
start = resident_mb()
arrays = [pc.add(pa.array(np.arange(1_000_000, dtype=np.float64)), 1.0) for _ in range(60)]
del arrays
held = resident_mb()
memory.give_back()
print(start, held, resident_mb())
"""


def test_giving_back_returns_the_memory_pyarrow_keeps_for_reuse():
    # In a process of its own: an allocator's reuse depends on everything the process did before.
    start, held, after = map(int, subprocess.run([sys.executable, "-c", HELD_AND_GIVEN_BACK], capture_output=True,
                                                 text=True, check=True).stdout.split())
    assert held - start > 300  # 480 MB of arrays, freed, still held by pyarrow's allocator
    assert after - start < (held - start) / 2


def test_giving_back_lets_go_of_the_database_and_the_next_one_keeps_the_settings(tmp_path):
    previous = duck.memory_settings()
    duck.configure("300MB", tmp_path / "spill")
    try:
        with duck.connect() as connection:
            before = connection.execute("SELECT current_setting('memory_limit')").fetchone()[0]
        first = duck._shared_database()
        memory.give_back()
        assert duck._shared_database() is not first
        with duck.connect() as connection:
            assert connection.execute("SELECT current_setting('memory_limit')").fetchone()[0] == before
            assert connection.execute("SELECT 41 + 1").fetchone()[0] == 42
    finally:
        duck.configure(previous.memory_limit, previous.temp_directory)
