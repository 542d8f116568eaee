"""Processes started together at a barrier: how the ledger tests make two publications race."""

import multiprocessing


def race(target, arguments: list[tuple], timeout_s: float = 60.0) -> list:
    """Run ``target(barrier, results, *args)`` in one spawned process per ``args``, all released at one barrier.

    ``target`` waits at ``barrier`` and puts one outcome on ``results``; returns the outcomes, in the
    order they arrived.
    """
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(len(arguments)), context.Queue()
    workers = [context.Process(target=target, args=(barrier, results, *args)) for args in arguments]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout_s)
    return [results.get(timeout=5) for _ in workers]
