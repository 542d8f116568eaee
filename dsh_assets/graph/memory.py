"""Every job's hooks that give a finished step's memory back to the system (``core.memory``), whatever its outcome:
a process running a run's steps in turn then holds the step it runs, not the peak of every step before it."""

from __future__ import annotations

import dagster as dg

from dsh_assets.core import memory


@dg.success_hook(name="give_back_memory")
def _after_success(_context: dg.HookContext) -> None:
    memory.give_back()


@dg.failure_hook(name="give_back_memory_after_failure")
def _after_failure(_context: dg.HookContext) -> None:
    memory.give_back()


MEMORY_HOOKS = frozenset({_after_success, _after_failure})
