"""The one writer of the process environment."""

import os

from dsh_assets.core.environment import export


def test_export_sets_a_variable_or_keeps_the_one_already_set(monkeypatch):
    monkeypatch.delenv("DSH_TEST_EXPORT", raising=False)
    export("DSH_TEST_EXPORT", "first", replace=False)
    assert os.environ["DSH_TEST_EXPORT"] == "first"
    export("DSH_TEST_EXPORT", "second", replace=False)
    assert os.environ["DSH_TEST_EXPORT"] == "first"
    export("DSH_TEST_EXPORT", "third")
    assert os.environ["DSH_TEST_EXPORT"] == "third"
