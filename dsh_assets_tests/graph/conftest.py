"""The Dagster tests run on an ephemeral instance; those about storage (what a run records and a later step reads
back: provenance, periods, check executions) run on a persistent one in PostgreSQL too (``storage_harness``)."""

from __future__ import annotations

import contextlib

import dagster as dg
import pytest

from dsh_assets.core.layout import Layout
from dsh_assets.graph.instance import POSTGRES_ENV, open_instance
from dsh_assets_tests.conftest import Harness, make_defs


@contextlib.contextmanager
def postgres_instance(request, tmp_path, monkeypatch):
    """The production setting: `open_instance` with DSH_POSTGRES_URL on a fresh database of the session's server."""
    server = request.getfixturevalue("postgres")
    monkeypatch.setenv(POSTGRES_ENV, server.new_database())
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))  # open_instance points it at the instance's home
    with open_instance(Layout(tmp_path / "instance_home")) as persistent:
        yield persistent


@pytest.fixture(params=["ephemeral", pytest.param("postgres", marks=pytest.mark.postgres)])
def storage_instance(request, tmp_path, monkeypatch):
    """An ephemeral instance, or a persistent one in PostgreSQL."""
    if request.param == "ephemeral":
        with dg.DagsterInstance.ephemeral() as ephemeral:
            yield ephemeral
        return
    with postgres_instance(request, tmp_path, monkeypatch) as persistent:
        yield persistent


@pytest.fixture
def storage_harness(home, source_file, storage_instance) -> Harness:
    """The small source's defs on each kind of storage: for the tests about what the instance records."""
    return Harness(make_defs(home, source_file), storage_instance, home)


@pytest.fixture
def build_storage_harness(storage_instance):
    """A Harness factory with other settings, on each kind of storage."""
    def build(home, source_path="", releases_file="") -> Harness:
        return Harness(make_defs(home, source_path, releases_file), storage_instance, home)
    return build
