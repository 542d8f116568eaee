"""pyproject.toml names a range of Dagster releases, and `make test-lowest` tests the lowest of them."""

import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
FAMILY = ("dagster", "dagster-webserver", "dagster-postgres")


def _dagster_requirements() -> dict[str, Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    listed = [*project["dependencies"], *(r for extra in project["optional-dependencies"].values() for r in extra)]
    return {requirement.name: requirement for requirement in map(Requirement, listed) if requirement.name in FAMILY}


def _bound(requirement: Requirement, operator: str) -> Version:
    (bound,) = [Version(spec.version) for spec in requirement.specifier if spec.operator == operator]
    return bound


def test_the_dagster_family_is_a_range_and_moves_together():
    requirements = _dagster_requirements()
    assert set(requirements) == set(FAMILY)
    dagster_low, dagster_high = _bound(requirements["dagster"], ">="), _bound(requirements["dagster"], "<")
    assert dagster_low < dagster_high
    assert (_bound(requirements["dagster-webserver"], ">="), _bound(requirements["dagster-webserver"], "<")) == (
        dagster_low, dagster_high)
    postgres_low = _bound(requirements["dagster-postgres"], ">=")
    # dagster-postgres 0.(Y+16).Z is the release of dagster 1.Y.Z
    assert (postgres_low.major + 1, postgres_low.minor - 16, postgres_low.micro) == dagster_low.release


def test_the_lowest_constraints_are_the_ranges_lower_bounds():
    lines = (ROOT / "constraints-lowest.txt").read_text(encoding="utf-8").splitlines()
    pinned = {r.name: r for r in map(Requirement, (line for line in lines if line and not line.startswith("#")))}
    assert {name: str(r.specifier) for name, r in pinned.items()} == {
        name: f"=={_bound(r, '>=')}" for name, r in _dagster_requirements().items()}
