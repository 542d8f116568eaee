"""The automation condition under which a release's evidence, and its period's publication, scorecard and report,
follow a release materialised on its own (e.g. "Materialize" on `released` in the UI).

Dagster's `eager()` treats an input that "will be requested" on the same tick as updated. A period's assets
(period partitions) cannot share a run with the per-release evidence (config x period partitions), so on the
tick that requests the evidence, eager also launched the scorecard and report in a second run, beside the
evidence they read: a report of stale figures, made again later, or (depending on which run finished first)
never remade. This condition waits until no input is about to be requested or in progress; the trigger (an
input updated, or the partition newly missing) is remembered until it is acted on.
"""

import dagster as dg

AFTER_ITS_INPUTS = (
    (dg.AutomationCondition.newly_missing() | dg.AutomationCondition.any_deps_updated()).since_last_handled()
    & ~dg.AutomationCondition.any_deps_missing()
    & ~dg.AutomationCondition.any_deps_match(dg.AutomationCondition.will_be_requested())
    & ~dg.AutomationCondition.any_deps_in_progress()
    & ~dg.AutomationCondition.in_progress()
).with_label("after its inputs")
