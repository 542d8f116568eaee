"""Release periods: the cadence turns a period key into its window, its predecessor and the latest ended one."""

from __future__ import annotations

import datetime as dt
import re

import pytest

from dsh_assets.core.periods import (
    PeriodError,
    latest_ended_period,
    next_period_start,
    past_period,
    period_window,
    previous_period,
)

UTC = dt.timezone.utc
NOW = dt.datetime(2026, 12, 1, 0, 15, tzinfo=UTC)


def midnight(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text).replace(tzinfo=UTC)


@pytest.mark.parametrize("cadence, period, end", [
    ("daily", "2026-11-20", "2026-11-21"),
    ("weekly", "2026-11-16", "2026-11-23"),
    ("monthly", "2026-12-01", "2027-01-01"),
    ("monthly", "2024-02-01", "2024-03-01"),
])
def test_a_period_is_its_first_day_up_to_the_next_periods(cadence, period, end):
    assert period_window(period, cadence) == (midnight(period), midnight(end))


def test_the_ledger_renews_a_month_on_the_same_day_or_the_months_last():
    assert next_period_start(dt.date(2026, 1, 31), "monthly") == dt.date(2026, 2, 28)


@pytest.mark.parametrize("cadence, period, previous", [
    ("daily", "2026-11-01", "2026-10-31"),
    ("weekly", "2026-11-02", "2026-10-26"),
    ("monthly", "2026-01-01", "2025-12-01"),
    ("monthly", "2026-03-01", "2026-02-01"),
])
def test_the_previous_period_follows_the_cadence(cadence, period, previous):
    assert previous_period(period, cadence) == previous


@pytest.mark.parametrize("cadence, latest", [("daily", "2026-11-30"), ("weekly", "2026-11-23"),
                                             ("monthly", "2026-11-01")])
def test_the_latest_ended_period_is_the_one_just_closed(cadence, latest):
    assert latest_ended_period(NOW, cadence) == latest
    _, end = period_window(latest, cadence)
    assert end <= NOW and period_window(latest, cadence)[0] < NOW


def test_any_past_period_is_accepted_a_year_back_and_more():
    assert past_period("2025-11-01", "daily", NOW) == "2025-11-01"
    assert past_period("2019-03-01", "monthly", NOW) == "2019-03-01"
    assert past_period("2026-11-30", "daily", NOW) == "2026-11-30"


@pytest.mark.parametrize("cadence, period, message", [
    ("daily", "2026-12-01", "period 2026-12-01 has not ended yet (it ends 2026-12-02 00:00 UTC)"),
    ("daily", "2099-01-01", "has not ended yet"),
    ("weekly", "2026-11-18", "is not a weekly release period: a weekly period starts on a Monday"),
    ("monthly", "2026-10-02", "a monthly period starts on the first day of a month"),
    ("daily", "2026-13-01", "period must be a date YYYY-MM-DD, not '2026-13-01'"),
    ("fortnightly", "2026-11-02", "cadence must be one of daily, weekly, monthly"),
])
def test_a_future_malformed_or_off_cadence_period_is_refused_by_name(cadence, period, message):
    with pytest.raises(PeriodError, match=re.escape(message)):
        past_period(period, cadence, NOW)
