"""A refusal is a failed step whose failure carries the verdict; any other error stays a fault."""

import dagster as dg
import pytest

from dsh_assets.core.release.configs import ConfigError
from dsh_assets.core.release.schema import SourceError
from dsh_assets.graph.refusals import refused_input, refusing


def _failed_step(error: Exception) -> dg.DagsterEvent:
    @dg.asset
    @refusing
    def table(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        raise error

    result = dg.materialize([table], raise_on_error=False, instance=dg.DagsterInstance.ephemeral())
    assert not result.success, "a refusal must still fail its step"
    (failure,) = [event for event in result.all_events if event.is_step_failure]
    return failure


@pytest.mark.parametrize("error", [SourceError("source x.parquet: column app is missing"),
                                   ConfigError("releases.toml: c99 names an unknown operation")])
def test_a_refused_input_fails_its_step_with_the_verdict(error):
    failure = _failed_step(error)
    assert refused_input(failure) == str(error)
    assert str(error) in failure.step_failure_data.error.message


def test_any_other_error_is_a_fault():
    assert refused_input(_failed_step(RuntimeError("disk full"))) is None
    assert refused_input(_failed_step(KeyError("app"))) is None


def test_every_asset_of_the_package_turns_refusals_into_verdicts():
    """The runner tells a refused input from a fault only by the verdict: an asset without `refusing` would make its
    refusals faults."""
    import ast

    from dsh_assets_tests.test_architecture import PACKAGE

    def names(decorator) -> str:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        return ast.unparse(target)

    assets, bare = 0, []
    for path in sorted((PACKAGE / "graph").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef):
                decorators = [names(d) for d in node.decorator_list]
                if {"dg.asset", "dg.multi_asset"} & set(decorators):
                    assets += 1
                    if "refusing" not in decorators:
                        bare.append(f"{path.relative_to(PACKAGE)}::{node.name}")
    assert assets and bare == []
