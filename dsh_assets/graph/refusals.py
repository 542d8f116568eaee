"""A step that refuses its input fails with its verdict as a value: the UI shows a failed step with the reason, and
the runner reads the verdict from the step's failure, never from the name of an exception.

The core refuses a source or a configuration it cannot take by raising SourceError or ConfigError (the message
names the problem). Every asset's compute function is wrapped by ``refusing``, which turns those into a
``dg.Failure`` whose metadata holds the verdict (``REFUSED``); anything else stays a fault.
"""

from __future__ import annotations

import functools

import dagster as dg

from dsh_assets.core.release.configs import ConfigError
from dsh_assets.core.release.schema import SourceError

REFUSED = "refused"
"""The failure metadata key of a refusal's reason."""
REFUSED_INPUTS = (SourceError, ConfigError)


def refusing(compute_fn):
    """``compute_fn`` with its refusals (REFUSED_INPUTS) raised as a Failure carrying the verdict; put under
    ``@dg.asset``, which sees the function's own signature."""

    @functools.wraps(compute_fn)
    def verdict_on_refusal(*args, **kwargs):
        try:
            return compute_fn(*args, **kwargs)
        except REFUSED_INPUTS as error:
            raise dg.Failure(description=str(error), metadata={REFUSED: str(error)}, allow_retries=False) from error

    return verdict_on_refusal


def refused_input(failure_event: dg.DagsterEvent) -> str | None:
    """The reason a failed step refused its input; None when it failed for another reason (a fault)."""
    failure = failure_event.step_failure_data.user_failure_data
    value = failure.metadata.get(REFUSED) if failure is not None else None
    return value.value if value is not None else None
