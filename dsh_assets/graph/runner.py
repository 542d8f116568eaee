"""Drive the Dagster definitions in-process, the way the schedule and sensor would: source, releases,
publication, report."""

import os
import socket
import time
from dataclasses import asdict, dataclass, field
from typing import Callable

import dagster as dg

from dsh_assets.core.duck import divided_memory_limit
from dsh_assets.core.evidence.metrics import RELEASE_ASSET, Evidence
from dsh_assets.core.publication.ledger import Refusal
from dsh_assets.core.release.configs import DP_COUNTS, DP_SYNTHETIC, ROW_RELEASE
from dsh_assets.graph import records
from dsh_assets.graph.dp.assets import DrawOptions
from dsh_assets.graph.instance import HOST_TAG, PID_TAG
from dsh_assets.graph.partitions import PERIODS, RELEASE_JOBS, register_period, release_key
from dsh_assets.core.privacy.anonymeter import FULL, LIGHT
from dsh_assets.core.publication.gate import check_candidate
from dsh_assets.graph.privacy.assets import STRENGTH_ATTACKS, StrengthOptions
from dsh_assets.graph.publication.assets import DP_PUBLISHED, PublishOptions
from dsh_assets.graph.refusals import refused_input

QUIET_LOGS = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


@dataclass(frozen=True)
class OwnPublication:
    """A release published on its own criteria: published at ``path``, or refused with every reason; its gate and
    the epsilon its tables cost either way."""

    published: bool
    path: str | None
    sha256: str | None
    refused: list[str]
    gate: dict
    epsilon_spent: float | None

    def as_json(self) -> dict:
        return {**asdict(self), "budget_spent": bool(self.epsilon_spent)}

    def words(self) -> str:
        """The verdict as the end of a progress line."""
        if self.published:
            return f"; published at {self.path}"
        spent = "" if self.epsilon_spent is None else f" (its epsilon {self.epsilon_spent:g} is spent)"
        return f"; not published: {'; '.join(self.refused)}{spent}"


@dataclass
class StepOutcome:
    """One run: did it succeed, what did it record, which checks passed, and why it failed."""

    success: bool
    """Every step ran and every check passed; a refused publication is a verdict and counts as success."""
    metadata: dict
    """What the run's main asset recorded."""
    figures: dict[str, dict]
    """Asset name -> the `figures` each asset materialised in this run recorded (empty if skipped)."""
    checks: dict[str, bool]
    errors: list[str]
    seconds: float
    refused: bool = False
    """A step refused its input (its failure carries the verdict, graph/refusals.py): the first error names the
    problem."""
    tracebacks: list[str] = field(default_factory=list)
    """The full error of each failed step, as recorded in the event log."""
    recorded: dict[str, dict] = field(default_factory=dict)
    """Asset name -> what each asset materialised in this run recorded."""
    refusals: dict[str, Refusal] = field(default_factory=dict)
    """Publication step -> its refusal in this run, as the publication ledger keeps it."""

    @property
    def evidence(self) -> Evidence:
        """The evidence the run's assets recorded, by family."""
        return Evidence.of_assets(self.figures)

    @property
    def own_publication(self) -> OwnPublication | None:
        """The release's own publication (a DP release's `dp_published`); None when its job has none, or it did not
        run."""
        refusal, recorded = self.refusals.get(DP_PUBLISHED), self.recorded.get(DP_PUBLISHED)
        if refusal is not None:
            return OwnPublication(False, None, None, refusal.reasons, refusal.gate, refusal.epsilon_spent)
        if recorded is not None:
            return OwnPublication(True, recorded["path"], recorded["sha256"], [], recorded["gate"],
                                  recorded.get("epsilon_spent"))
        return None


@dataclass
class Publication:
    """The period's publication step: published, or refused with every reason (a verdict, not a failure)."""

    step: StepOutcome
    config: str | None
    published: bool
    refused: list[str]
    gate: dict
    crashed: bool
    """True when the step failed for another reason than a refusal (a fault, not a verdict)."""
    considered: list[dict] = field(default_factory=list)
    """Each configuration of the publication list tried, in its order: {"config", "refused"} (empty: published)."""


@dataclass
class PeriodOutcome:
    period: str
    source: StepOutcome
    releases: dict[str, StepOutcome] = field(default_factory=dict)
    publication: Publication | None = None
    report: StepOutcome | None = None

    @property
    def success(self) -> bool:
        """Every candidate evaluated with its checks passed and the report written; a refused publication is
        a verdict and does not count against it (a crashed publication step does)."""
        return (self.source.success and all(step.success for step in self.releases.values())
                and (self.publication is None or not self.publication.crashed)
                and self.report is not None and self.report.success)

    @property
    def failed_steps(self) -> list[str]:
        """What failed: "source", a configuration's id, "publication" (crashed, not refused), "report"."""
        failed = [] if self.source.success else ["source"]
        failed += [config_id for config_id, step in self.releases.items() if not step.success]
        failed += ["report"] if self.report is not None and not self.report.success else []
        failed += ["publication"] if self.publication is not None and self.publication.crashed else []
        return failed

    @property
    def report_path(self) -> str | None:
        """Where the report was written; None when it was not."""
        return self.report.metadata.get("path") if self.report is not None and self.report.success else None

    @property
    def own_publications(self) -> dict[str, OwnPublication]:
        """Config id -> the verdict of each release published on its own (a DP release's)."""
        verdicts = {config_id: step.own_publication for config_id, step in self.releases.items()}
        return {config_id: verdict for config_id, verdict in verdicts.items() if verdict is not None}


def _step_failures(result: dg.ExecuteInProcessResult, verdicts=()) -> list[tuple[dg.DagsterEvent, object]]:
    """(the failure event, its error's root cause past Dagster's wrapper) of each failed step but the
    ``verdicts``."""
    failures = []
    for event in result.all_events:
        if event.is_step_failure and event.step_failure_data.error is not None and event.step_key not in verdicts:
            cause = event.step_failure_data.error
            while cause.cause is not None and cause.cls_name in {"DagsterExecutionStepExecutionError"}:
                cause = cause.cause
            failures.append((event, cause))
    return failures


def _errors(result: dg.ExecuteInProcessResult, failures) -> list[str]:
    """Each step failure's message (``_step_failures``), then each failed check with its problem."""
    errors = [cause.message.strip() for _, cause in failures]
    for evaluation in result.get_asset_check_evaluations():
        if not evaluation.passed:
            problem = evaluation.metadata.get("problem")
            detail = f": {problem.value}" if problem is not None else ""
            errors.append(f"check {evaluation.check_name} failed{detail}")
    return errors


def launch(defs: dg.Definitions, instance: dg.DagsterInstance, job_name: str, partition_key,
           options: dict[str, dg.Config] | None = None, raise_on_error: bool = False,
           log_level: str = "WARNING") -> dg.ExecuteInProcessResult:
    """One in-process run of a job for one partition: what `dsh`, the tests and the sensor's runs all do.

    ``options``: asset name -> its run options (a ``dg.Config``). ``log_level`` is the console's: whatever it
    hides, the event log keeps (tracebacks included).
    """
    run_config = dg.RunConfig(ops=options or {}, loggers={"console": {"config": {"log_level": log_level}}})
    return defs.resolve_job_def(job_name).execute_in_process(
        instance=instance, partition_key=partition_key, raise_on_error=raise_on_error, run_config=run_config,
        tags={PID_TAG: str(os.getpid()), HOST_TAG: socket.gethostname()},
    )


def launch_source(defs: dg.Definitions, instance: dg.DagsterInstance, period: str,
                  raise_on_error: bool = False, log_level: str = "WARNING") -> dg.ExecuteInProcessResult:
    """The period's source. The period is registered first and forgotten again when this run added it and
    no source got recorded (a refused file), so the instance knows exactly the periods that have a source."""
    added = register_period(instance, period)
    try:
        return launch(defs, instance, "source_job", period, raise_on_error=raise_on_error, log_level=log_level)
    finally:
        if added and records.recorded(defs.resources["home"], dg.AssetKey("source"), period) is None:
            instance.delete_dynamic_partition(PERIODS.name, period)


DRAWN = {DP_COUNTS: ("dp_release", "dp_q1_median"), DP_SYNTHETIC: ("dp_synthetic_release",)}
"""The assets of a kind that draw noise afresh (and debit the ledger) when a run asks to republish."""
STRENGTH_ASSETS = {ROW_RELEASE: STRENGTH_ATTACKS, DP_SYNTHETIC: ("dp_synthetic_privacy",)}
"""The assets of a kind with a light evaluation, at the strength a run may choose."""


def launch_release(defs: dg.Definitions, instance: dg.DagsterInstance, config, period: str, republish: bool = False,
                   raise_on_error: bool = False, log_level: str = "WARNING",
                   strength: str = "") -> dg.ExecuteInProcessResult:
    """The release of one configuration for one period with its evidence, by the job of its kind; ``strength``:
    anonymeter's ("full", "light"; empty: as the publication list says)."""
    drawn_again = republish and config.kind in DRAWN  # a row-level release is the same bytes every run
    options = {asset: DrawOptions(republish=True) for asset in DRAWN[config.kind]} if drawn_again else {}
    if strength:
        options.update({asset: StrengthOptions(strength=strength) for asset in STRENGTH_ASSETS.get(config.kind, ())})
    return launch(defs, instance, RELEASE_JOBS[config.kind], release_key(config.id, period), options=options,
                  raise_on_error=raise_on_error, log_level=log_level)


def launch_publication(defs: dg.Definitions, instance: dg.DagsterInstance, period: str, publish: str | None = None,
                       also_publish: bool = False, raise_on_error: bool = False,
                       log_level: str = "WARNING") -> dg.ExecuteInProcessResult:
    """The period's pair evidence and its publication (the configuration named, or the policy's)."""
    options = {"published": PublishOptions(config_id=publish or "", also_publish=also_publish)}
    return launch(defs, instance, "publication_job", period, options=options, raise_on_error=raise_on_error,
                  log_level=log_level)


def launch_report(defs: dg.Definitions, instance: dg.DagsterInstance, period: str,
                  raise_on_error: bool = False, log_level: str = "WARNING") -> dg.ExecuteInProcessResult:
    return launch(defs, instance, "report_job", period, raise_on_error=raise_on_error, log_level=log_level)


def _outcome(defs: dg.Definitions, result: dg.ExecuteInProcessResult, asset_key: dg.AssetKey,
             started: float) -> StepOutcome:
    """The run's outcome; its publication steps' refusals are the verdicts the publication ledger keeps."""
    checks = {evaluation.check_name: evaluation.passed for evaluation in result.get_asset_check_evaluations()}
    refusals = defs.resources["publications"].refusals_of_run(result.run_id)
    failures = _step_failures(result, refusals)
    recorded = {}
    for event in result.get_asset_materialization_events():
        materialization = event.step_materialization_data.materialization
        recorded[materialization.asset_key.to_user_string()] = {
            key: value.value for key, value in materialization.metadata.items()
        }
    ran = result.success or (bool(refusals) and not failures)
    return StepOutcome(
        success=ran and all(checks.values()),
        metadata=recorded.get(asset_key.to_user_string(), {}),
        figures={name: metadata.get("figures") or {} for name, metadata in recorded.items()},
        checks=checks,
        errors=_errors(result, failures),
        seconds=time.perf_counter() - started,
        refused=any(refused_input(event) is not None for event, _ in failures),
        tracebacks=[event.step_failure_data.error.to_string() for event, _ in failures],
        recorded=recorded,
        refusals=refusals,
    )


def _failure_line(step: StepOutcome) -> str:
    """FAILED and its errors; for a refusal, REFUSED and the message alone (no exception class path)."""
    if step.refused:
        return "REFUSED: " + "; ".join(error.split(": ", 1)[-1] for error in step.errors)
    return "FAILED: " + "; ".join(step.errors)


def run_period(defs: dg.Definitions, instance: dg.DagsterInstance, period: str, configs: dict,
               progress: Callable[[str], None] = lambda message: None, republish: bool = False,
               publish: str | None = None, also_publish: bool = False, log_level: str = "WARNING") -> PeriodOutcome:
    """The period's source, then each configuration of ``configs`` (id -> configuration) as a candidate, then
    the publication (``publish`` overrides the policy's configuration), then the report."""
    outcome = PeriodOutcome(period=period, source=run_source(defs, instance, period, progress, log_level))
    if not outcome.source.success:
        return outcome
    outcome.releases = run_candidates(defs, instance, period, configs, progress, republish, log_level, publish)
    outcome.publication = run_publication(defs, instance, period, progress, publish, also_publish, log_level)
    outcome.report = run_report(defs, instance, period, progress, log_level=log_level)
    return outcome


def run_sweep(defs: dg.Definitions, instance: dg.DagsterInstance, period: str, configs: dict,
              progress: Callable[[str], None] = lambda message: None, log_level: str = "WARNING") -> PeriodOutcome:
    """The points of the sweeps (``configs``) as candidates of the period, then the report, which draws every
    candidate the period has; the source is materialised first when the period has none yet. Nothing is
    published."""
    stored = records.recorded(defs.resources["home"], dg.AssetKey("source"), period)
    source = (StepOutcome(True, stored.values, {}, {}, [], 0.0) if stored is not None
              else run_source(defs, instance, period, progress, log_level))
    outcome = PeriodOutcome(period=period, source=source)
    if not source.success:
        return outcome
    outcome.releases = run_candidates(defs, instance, period, configs, progress, False, log_level)
    outcome.report = run_report(defs, instance, period, progress, log_level=log_level)
    return outcome


def run_source(defs: dg.Definitions, instance: dg.DagsterInstance, period: str, progress: Callable[[str], None],
               log_level: str) -> StepOutcome:
    progress(f"source {period}: materialising")
    started = time.perf_counter()
    source = _outcome(defs, launch_source(defs, instance, period, log_level=log_level), dg.AssetKey("source"), started)
    if not source.success:
        progress(f"source {period}: {_failure_line(source)}")
    else:
        progress(f"source {period}: {source.metadata['rows']:,} rows, {source.metadata['subscribers']:,} subscribers "
                 f"({source.seconds:.1f} s)")
    return source


def run_candidates(defs: dg.Definitions, instance: dg.DagsterInstance, period: str, configs: dict,
                   progress: Callable[[str], None], republish: bool, log_level: str,
                   publish: str | None = None) -> dict[str, StepOutcome]:
    """Each configuration's release of the period with its checks and evidence, one run each, up to the home's
    ``workers`` at once, each in a worker process of its own (``CandidatePool``; one after another on an ephemeral
    instance, which lives in this process only). The candidates the publication tries (``publish``, else the
    policy's list) go in the list's order, each after the verdict of the one before it: once one passes, the rest of
    the list is not tried, and gets the light evaluations; the others fill the other workers."""
    home = defs.resources["home"]
    policy = defs.resources["publications"].policy()
    tried = [publish] if publish else list(policy.config_ids)
    order = CandidateOrder([c for c in tried if c in configs], [c for c in configs if c not in tried])
    workers = 1 if instance.is_ephemeral else max(1, min(home.workers, len(configs)))
    arguments = dict(period=period, republish=republish, log_level=log_level)
    done = {}
    with CandidatePool(home, instance, workers) if workers > 1 else _InProcess(defs, instance) as pool:
        for config_id, step in pool.run(order, configs, **arguments):
            done[config_id] = step
            order.finished(config_id, step, policy)
            _progress_line(len(done), len(configs), config_id, step, progress)
    return {config_id: done[config_id] for config_id in configs}


@dataclass
class CandidateOrder:
    """Which candidate to launch next, with which anonymeter strength: those the publication tries one at a time,
    full strength until one passes its gate, light after it; the others, light, whenever a worker is free."""

    tried: list[str]
    others: list[str]
    passed: bool = False
    awaited: str | None = None
    """The candidate the publication tries that is running: the next one waits for its verdict."""

    def next(self) -> tuple[str, str] | None:
        """(config id, anonymeter strength) of the next launch; None when none can go now."""
        if self.tried and self.awaited is None:
            config_id = self.tried.pop(0)
            self.awaited = None if self.passed else config_id
            return config_id, LIGHT if self.passed else FULL
        if self.others:
            return self.others.pop(0), LIGHT
        return None

    def finished(self, config_id: str, step: StepOutcome, policy) -> None:
        """A candidate's outcome: the one awaited passes when its run succeeded and its gate holds."""
        if config_id == self.awaited:
            self.awaited = None
            self.passed = step.success and not check_candidate(policy, step.evidence)[1]


def _candidate(defs: dg.Definitions, instance: dg.DagsterInstance, config, period: str, republish: bool,
               log_level: str, strength: str) -> StepOutcome:
    started = time.perf_counter()
    launched = launch_release(defs, instance, config, period, republish=republish, log_level=log_level,
                              strength=strength)
    return _outcome(defs, launched, dg.AssetKey(RELEASE_ASSET[config.kind]), started)


def _progress_line(index: int, count: int, config_id: str, step: StepOutcome, progress: Callable[[str], None]):
    if step.success:
        progress(f"[{index}/{count}] {config_id}: {step.metadata['rows_released']:,} rows released, "
                 f"{step.metadata['rows_withheld']:,} withheld, checks passed ({step.seconds:.1f} s)"
                 f"{step.own_publication.words() if step.own_publication else ''}")
    else:
        progress(f"[{index}/{count}] {config_id}: {_failure_line(step)}")


class _InProcess:
    """The candidates one after another in this process."""

    def __init__(self, defs: dg.Definitions, instance: dg.DagsterInstance):
        self._defs, self._instance = defs, instance

    def __enter__(self) -> "_InProcess":
        return self

    def __exit__(self, *_) -> None:
        pass

    def run(self, order: CandidateOrder, configs: dict, **arguments):
        while (launch := order.next()) is not None:
            config_id, strength = launch
            yield config_id, _candidate(self._defs, self._instance, configs[config_id], strength=strength, **arguments)


class CandidatePool:
    """``workers`` processes, each started once with the definitions of the home's settings (handed to it, not read
    from the environment) and the instance of its Dagster home, each running candidates' release runs in-process
    one after another. A process start costs about 1.5 s of imports and definitions: once per worker, not once per
    run or per step (benchmarks/README.md)."""

    def __init__(self, home, instance: dg.DagsterInstance, workers: int):
        import concurrent.futures
        import multiprocessing

        fields = {**home.model_dump(), "duckdb_memory_limit": divided_memory_limit(home.duckdb_memory_limit, workers)}
        self._workers = workers
        self._executor = concurrent.futures.ProcessPoolExecutor(
            max_workers=workers, mp_context=multiprocessing.get_context("spawn"), initializer=_start_worker,
            initargs=(fields, instance.root_directory))

    def __enter__(self) -> "CandidatePool":
        return self

    def __exit__(self, *_) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)

    def run(self, order: CandidateOrder, configs: dict, **arguments):
        """(config id, outcome) of each launch as each finishes, launching the next whenever a worker is free."""
        import concurrent.futures

        running = {}

        def launch_what_can_go() -> None:
            while len(running) < self._workers and (launch := order.next()) is not None:
                config_id, strength = launch
                running[self._executor.submit(_candidate_in_worker, configs[config_id], strength=strength,
                                              **arguments)] = config_id

        launch_what_can_go()
        while running:
            finished, _ = concurrent.futures.wait(running, return_when=concurrent.futures.FIRST_COMPLETED)
            for future in finished:
                yield running.pop(future), future.result()
            launch_what_can_go()


_worker_state: tuple[dg.Definitions, dg.DagsterInstance] | None = None
"""A worker process's definitions and instance, made once when it starts."""


def _start_worker(fields: dict, dagster_home: str) -> None:
    from dsh_assets.definitions import build_defs
    from dsh_assets.graph.resources import DshHome

    global _worker_state
    _worker_state = (build_defs(DshHome(**fields)), dg.DagsterInstance.from_config(dagster_home))


def _candidate_in_worker(config, period: str, republish: bool, log_level: str, strength: str) -> StepOutcome:
    defs, instance = _worker_state
    return _candidate(defs, instance, config, period, republish, log_level, strength)


def run_publication(defs: dg.Definitions, instance: dg.DagsterInstance, period: str, progress: Callable[[str], None],
                    publish: str | None, also_publish: bool, log_level: str) -> Publication:
    """The pair evidence and the publication: published, or refused with every reason (a verdict), or crashed."""
    started = time.perf_counter()
    launched = launch_publication(defs, instance, period, publish, also_publish, log_level=log_level)
    return _publication(_outcome(defs, launched, dg.AssetKey("published"), started), period, publish, progress)


def _publication(step: StepOutcome, period: str, publish: str | None, progress: Callable[[str], None]) -> Publication:
    """The publication step's outcome: published, refused (a verdict) or crashed (a fault)."""
    refusal = step.refusals.get("published")
    if refusal is not None:
        for tried in refusal.considered or [{"config": refusal.config_id or period, "refused": refusal.reasons}]:
            progress(f"publication refused for {tried['config']}: {'; '.join(tried['refused'])}")
        return Publication(step, refusal.config_id or None, False, refusal.reasons, refusal.gate, False,
                           refusal.considered)
    if step.success:
        considered = step.metadata.get("considered") or []
        for tried in considered[:-1]:
            progress(f"not published {tried['config']}: {'; '.join(tried['refused'])}")
        progress(f"published {step.metadata['config']}: {step.metadata['path']}")
        return Publication(step, step.metadata["config"], True, [], step.metadata.get("gate") or {}, False,
                           considered)
    progress(f"publication {period}: FAILED: {'; '.join(step.errors)}")
    return Publication(step, publish, False, step.errors, {}, True)


def run_report(defs: dg.Definitions, instance: dg.DagsterInstance, period: str,
               progress: Callable[[str], None] = lambda message: None, log_level: str = "WARNING") -> StepOutcome:
    """The scorecard and the HTML report of a period, from whatever releases it has."""
    started = time.perf_counter()
    launched = launch_report(defs, instance, period, log_level=log_level)
    report = _outcome(defs, launched, dg.AssetKey("release_report"), started)
    if report.success:
        progress(f"report {period}: {report.metadata['path']} ({report.seconds:.1f} s)")
    else:
        progress(f"report {period}: FAILED: {'; '.join(report.errors)}")
    return report
