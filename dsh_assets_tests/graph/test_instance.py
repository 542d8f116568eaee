"""The instance configuration a home installs: its storage at the home's own path, the run queue's limit its
workers."""

from pathlib import Path

import dagster as dg

from dsh_assets.core.layout import Layout
from dsh_assets.graph.instance import INSTANCE_TEMPLATE, installed_configuration, open_instance


def test_the_installed_configuration_names_its_storage_and_the_workers():
    text = installed_configuration(INSTANCE_TEMPLATE.read_text(), Layout(Path("/h")).dagster_home, 3)
    assert "max_concurrent_runs: 3" in text and "max_concurrent_runs: 2" not in text
    assert 'base_dir: "/h/dagster"' in text and "DAGSTER_HOME" not in text.split("storage:", 1)[1]


def test_a_process_opens_the_homes_instance_from_its_folder_alone(tmp_path, monkeypatch):
    """What a worker process does: no environment variable names the storage."""
    layout = Layout(tmp_path / "home")
    open_instance(layout, workers=4).dispose()
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    with dg.DagsterInstance.from_config(str(layout.dagster_home)) as instance:
        assert instance.get_runs() == []
        assert instance.root_directory == str(layout.dagster_home)
