"""The persistent Dagster instance under the home folder, shared by `dsh` and the UI."""

import os
import shutil
from pathlib import Path

import dagster as dg

from dsh_assets.core.layout import CHECKOUT, Layout

INSTANCE_TEMPLATE = CHECKOUT / "dagster.yaml"


def prepare_dagster_home(layout: Layout) -> Path:
    """Install the checkout's dagster.yaml into HOME/dagster and point DAGSTER_HOME at it."""
    if not INSTANCE_TEMPLATE.is_file():
        raise FileNotFoundError(f"instance configuration {INSTANCE_TEMPLATE} is missing from the checkout")
    dagster_home = layout.dagster_home
    dagster_home.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(INSTANCE_TEMPLATE, dagster_home / "dagster.yaml")
    os.environ["DAGSTER_HOME"] = str(dagster_home)
    return dagster_home


def open_instance(layout: Layout) -> dg.DagsterInstance:
    return dg.DagsterInstance.from_config(str(prepare_dagster_home(layout)))
