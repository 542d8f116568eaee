"""Memory a finished step no longer uses, given back to the system.

A process that runs many steps in turn (a candidate worker of ``dsh run``, a run the UI or the daemon launches in
one process) otherwise keeps the peak of every step it ran: pyarrow's allocator and DuckDB's buffers hold what was
freed, for reuse. After the ingest of the 1.1M-row default source a process held 657 MB; with pyarrow's unused memory
given back, 293 MB; with DuckDB's database let go too, 168 MB.
"""

from __future__ import annotations

import pyarrow as pa

from dsh_assets.core import duck


def give_back() -> None:
    """Let go of this process's DuckDB database and return pyarrow's unused memory to the system."""
    duck.drop_database()
    pa.default_memory_pool().release_unused()
