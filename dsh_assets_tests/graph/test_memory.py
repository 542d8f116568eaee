import dagster as dg

from dsh_assets.core import memory
from dsh_assets.graph import runner
from dsh_assets_tests.conftest import PERIOD, make_defs


def test_every_job_gives_each_finished_steps_memory_back(home, source_file, instance, monkeypatch):
    defs = make_defs(home, source_file)
    for job in defs.jobs:
        hooks = {hook.name for hook in defs.resolve_job_def(job.name).hook_defs}
        assert hooks == {"give_back_memory", "give_back_memory_after_failure"}, job.name
    given_back = []
    monkeypatch.setattr(memory, "give_back", lambda: given_back.append(True))
    result = runner.launch_source(defs, instance, PERIOD, raise_on_error=True)
    steps = [event for event in result.all_events if event.event_type == dg.DagsterEventType.STEP_SUCCESS]
    assert steps and len(given_back) == len(steps)
