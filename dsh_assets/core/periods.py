"""Release periods as plain dates: a period is named by its first day, and the cadence is the rule that
gives its time window, the period before it and the latest one that has ended.

The Dagster graph registers a period when its source arrives; which periods exist is the instance's
record, while what a period *is* (its window, its predecessor) follows from these functions alone.
"""

from __future__ import annotations

import calendar
import datetime as dt

CADENCES = ("daily", "weekly", "monthly")
DEFAULT_CADENCE = "daily"
FIRST_DAY = {"weekly": "a Monday", "monthly": "the first day of a month"}
"""What a period key must be under each cadence that does not start every day."""


class PeriodError(ValueError):
    """A period key that names no period of the cadence, or a period that has not ended yet."""


def check_cadence(cadence: str) -> str:
    if cadence not in CADENCES:
        raise PeriodError(f"release period cadence must be one of {', '.join(CADENCES)}, not {cadence!r}")
    return cadence


def period_start(period: str, cadence: str) -> dt.date:
    """The first day of the period named ``period`` (YYYY-MM-DD); refused when it starts no period of the cadence."""
    check_cadence(cadence)
    try:
        start = dt.date.fromisoformat(str(period))
    except ValueError:
        raise PeriodError(f"period must be a date YYYY-MM-DD, not {period!r}") from None
    if (cadence == "weekly" and start.weekday() != 0) or (cadence == "monthly" and start.day != 1):
        raise PeriodError(f"period {period} is not a {cadence} release period: a {cadence} period starts on "
                          f"{FIRST_DAY[cadence]}")
    return start


def next_period_start(start: dt.date, cadence: str) -> dt.date:
    """The day after the period starting on ``start`` ends (a month on: the same day, or the month's last)."""
    check_cadence(cadence)
    if cadence == "daily":
        return start + dt.timedelta(days=1)
    if cadence == "weekly":
        return start + dt.timedelta(days=7)
    year, month = (start.year + 1, 1) if start.month == 12 else (start.year, start.month + 1)
    return dt.date(year, month, min(start.day, calendar.monthrange(year, month)[1]))


def _midnight(day: dt.date) -> dt.datetime:
    return dt.datetime.combine(day, dt.time(), dt.timezone.utc)


def period_window(period: str, cadence: str) -> tuple[dt.datetime, dt.datetime]:
    """The period's time window [start, end) in UTC: its source holds rows of this window only."""
    start = period_start(period, cadence)
    return _midnight(start), _midnight(next_period_start(start, cadence))


def _start_of_period_containing(day: dt.date, cadence: str) -> dt.date:
    if cadence == "daily":
        return day
    if cadence == "weekly":
        return day - dt.timedelta(days=day.weekday())
    return day.replace(day=1)


def previous_period(period: str, cadence: str) -> str:
    """The period just before ``period`` (cross-release evidence links a release to it)."""
    start = period_start(period, cadence)
    return _start_of_period_containing(start - dt.timedelta(days=1), cadence).isoformat()


def latest_ended_period(now: dt.datetime, cadence: str) -> str:
    """The latest period that has ended by ``now`` (an aware datetime): the one a new day, week or month closes."""
    current = _start_of_period_containing(now.astimezone(dt.timezone.utc).date(), check_cadence(cadence))
    return _start_of_period_containing(current - dt.timedelta(days=1), cadence).isoformat()


def past_period(period: str, cadence: str, now: dt.datetime) -> str:
    """``period`` as a key, when it names a period of the cadence that has ended by ``now``; refused otherwise."""
    start, end = period_window(period, cadence)
    if end > now:
        raise PeriodError(f"period {period} has not ended yet (it ends {end:%Y-%m-%d %H:%M} UTC); "
                          f"only a past period can be released (the latest is {latest_ended_period(now, cadence)})")
    return start.date().isoformat()
