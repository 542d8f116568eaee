"""The Dagster tests run twice: on an ephemeral instance and on a persistent one in PostgreSQL."""

from __future__ import annotations

import contextlib

import dagster as dg
import pytest

from dsh_assets.core.layout import Layout
from dsh_assets.graph.instance import POSTGRES_ENV, open_instance


@contextlib.contextmanager
def postgres_instance(request, tmp_path, monkeypatch):
    """The production setting: `open_instance` with DSH_POSTGRES_URL on a fresh database of the session's server."""
    server = request.getfixturevalue("postgres")
    monkeypatch.setenv(POSTGRES_ENV, server.new_database())
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))  # open_instance points it at the instance's home
    with open_instance(Layout(tmp_path / "instance_home")) as persistent:
        yield persistent


@pytest.fixture(params=["ephemeral", "postgres"])
def instance(request, tmp_path, monkeypatch):
    """An ephemeral instance, or a persistent one in PostgreSQL."""
    if request.param == "ephemeral":
        with dg.DagsterInstance.ephemeral() as ephemeral:
            yield ephemeral
        return
    with postgres_instance(request, tmp_path, monkeypatch) as persistent:
        yield persistent
