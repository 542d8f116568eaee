"""`dsh`: synthesise a source, run every release configuration, verify stored releases, open the UI."""

from __future__ import annotations

import argparse
import datetime as dt
import errno
import json
import os
import shutil
import signal
import sys
import traceback
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

import dagster as dg

from dsh_assets.core.engines import ENGINES
from dsh_assets.core.environment import export
from dsh_assets.core.files import DigestBook
from dsh_assets.core.home import check_home, exclusive_lock
from dsh_assets.core.layout import CHECKOUT, Layout
from dsh_assets.core.periods import latest_ended_period, past_period
from dsh_assets.core.publication.gate import check_candidate, closest_risk, light_evaluation
from dsh_assets.core.privacy.anonymeter import AnonymeterUnavailable
from dsh_assets.core.privacy.anonymeter import check_environment as check_anonymeter_environment
from dsh_assets.core.release.configs import (
    DP_COUNTS,
    DP_SYNTHETIC,
    ROW_RELEASE,
    ConfigError,
    period_configs,
    sweep_configs,
)
from dsh_assets.core.release.schema import SourceError, load_schema
from dsh_assets.core.release.synth import DEFAULT_ROWS, DEFAULT_SEED, DEFAULT_SUBSCRIBERS, synthesize
from dsh_assets.core.secrets import SecretsError
from dsh_assets.core.verification import Verification
from dsh_assets.settings import environment_settings

if TYPE_CHECKING:  # the graph is imported by the commands that run it
    from dsh_assets.graph.runner import PeriodOutcome

LOW_DISK_BYTES = 4 << 20
"""Below this much free space under the home, an unexpected storage error is reported as a full disk."""
RUN_LOCK = ".run.lock"
"""In HOME/dagster: held by `dsh run` from opening the instance to the report."""

warnings.filterwarnings("ignore", category=dg.PreviewWarning)
warnings.filterwarnings("ignore", category=dg.BetaWarning)


EXIT_NOT_PUBLISHED = 3
"""`dsh run --require-publication`: every candidate evaluated, but the gate published nothing."""


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _period(text: str) -> str:
    try:
        return dt.date.fromisoformat(text).isoformat()
    except ValueError:
        raise argparse.ArgumentTypeError(f"period must be a date YYYY-MM-DD, not {text!r}") from None


def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def _release_period(requested: str | None, cadence: str) -> str:
    """The period to release: the one asked for, when it fits the cadence and has ended; else the latest ended."""
    return past_period(requested, cadence, _now()) if requested else latest_ended_period(_now(), cadence)


def _workers(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: a whole number of workers, at least 1")
    return int(text)


def _home(args) -> Path:
    """The home folder, created if need be; a file, a folder without permissions or a read-only one is refused, and
    so is a malformed setting, before anything is made."""
    default = environment_settings()["home"]
    return check_home(Path(args.home or default).resolve())


def cmd_synth(args) -> int:
    synthesize(args.out, rows=args.rows, subscribers=args.subscribers, seed=args.seed,
               period=dt.date.fromisoformat(args.period),
               schema=load_schema(environment_settings()["columns_file"] or None))
    _stderr(f"wrote {args.out}: {args.rows:,} rows, {args.subscribers:,} subscribers, period {args.period}")
    print(json.dumps({"path": str(Path(args.out).resolve()),
                      "sha256": DigestBook().sha256(args.out)}) if args.json else args.out)
    return 0


def cmd_run(args) -> int:
    from dsh_assets.core.publication.publish import candidate_statuses
    from dsh_assets.definitions import build_defs, settings_from_environment
    from dsh_assets.graph.instance import open_instance
    from dsh_assets.graph.resources import resources_for
    from dsh_assets.graph.runner import run_period
    from dsh_assets.graph.summary import budget_after, run_json

    period = _release_period(args.period, settings_from_environment().cadence)  # refused before the home is made
    home = _home(args)
    source = str(Path(args.source).resolve()) if args.source else None
    settings = settings_from_environment(home=str(home), source_path=source, engine=args.engine,
                                         workers=args.workers)
    defs = build_defs(settings)
    configs = settings.configs()
    config_ids = args.config or list(period_configs(configs))
    unknown = [c for c in config_ids if c not in configs]
    if unknown:
        raise ConfigError(f"unknown configuration(s) {', '.join(unknown)}; known: {', '.join(configs)}")
    resources_for(settings)["secrets"].load()  # a misconfigured secret stops the run before anything is written
    if any(configs[c].kind in (ROW_RELEASE, DP_SYNTHETIC) for c in config_ids):
        # so does a missing anonymeter environment (its evidence gates publication)
        check_anonymeter_environment(settings.anonymeter_python)
    if args.publish and args.publish not in configs:
        raise ConfigError(f"--publish {args.publish}: unknown configuration; known: {', '.join(configs)}")
    # Runs on one home queue: the later waits for the earlier (one writer of files and records per home).
    with exclusive_lock(Layout(home).dagster_home / RUN_LOCK, on_wait=lambda holder: _stderr(
            f"dsh run: another dsh run (pid {holder}) is running on {home}; waiting for it to finish")):
        instance = open_instance(Layout(home), progress=_stderr, workers=settings.workers)
        outcome = run_period(defs, instance, period, {c: configs[c] for c in config_ids}, progress=_stderr,
                             republish=args.republish, publish=args.publish, also_publish=args.also_publish,
                             log_level=_console_log_level(args))
    statuses = candidate_statuses(Layout(home), period, config_ids)
    if args.json:
        print(json.dumps(run_json(outcome, statuses, budget_after(settings, period)), indent=2))
    elif outcome.success:
        _print_summary(outcome, home, statuses, resources_for(settings)["publications"].policy())
    if outcome.source.refused:
        return 2  # the progress line named the problem; the traceback is in the event log (and above, with --verbose)
    if not outcome.success:
        _stderr(f"dsh run: failed: {', '.join(outcome.failed_steps)}")
        return 1
    if outcome.publication is not None and not outcome.publication.published:
        _stderr(f"dsh run: every candidate was evaluated; {_not_published(outcome)} for {period}: "
                f"{'; '.join(outcome.publication.refused)}")
        return EXIT_NOT_PUBLISHED if args.require_publication else 0
    return 0


def cmd_sweep(args) -> int:
    from dsh_assets.definitions import build_defs, settings_from_environment
    from dsh_assets.graph.instance import open_instance
    from dsh_assets.graph.resources import resources_for
    from dsh_assets.graph.runner import run_sweep
    from dsh_assets.graph.summary import sweep_json

    period = _release_period(args.period, settings_from_environment().cadence)
    home = _home(args)
    settings = settings_from_environment(home=str(home), source_path=str(Path(args.source).resolve())
                                         if args.source else None)
    defs, configs = build_defs(settings), settings.configs()
    points = sweep_configs(configs)
    if not points:
        raise ConfigError("the release configurations file declares no [sweep.*] table")
    check_anonymeter_environment(settings.anonymeter_python)
    with exclusive_lock(Layout(home).dagster_home / RUN_LOCK, on_wait=lambda holder: _stderr(
            f"dsh sweep: a dsh run (pid {holder}) is running on {home}; waiting for it to finish")):
        outcome = run_sweep(defs, open_instance(Layout(home), progress=_stderr), period, points, progress=_stderr,
                            log_level=_console_log_level(args))
    summary = sweep_json(outcome, configs, resources_for(settings)["publications"].policy())
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        _print_sweep(summary["candidates"], outcome.report_path)
    if outcome.source.refused:
        return 2
    if outcome.failed_steps:
        _stderr(f"dsh sweep: failed: {', '.join(outcome.failed_steps)}")
        return 1
    return 0


def _print_sweep(candidates: dict, report: str | None) -> None:
    print(f"{'candidate':32} {'worst risk':>10}  {'against':26} {'utility kept':>12}  gate")
    for config_id, row in candidates.items():
        risk = "n/a" if row["worst_risk"] is None else f"{row['worst_risk']:.3f}"
        kept = "n/a" if row["utility_kept"] is None else f"{row['utility_kept']:.3f}"
        verdict = "passes" if row["publishable"] else "refused: " + "; ".join(row["refused"])
        print(f"{config_id:32} {risk:>10}  {row['worst_attack'] or '-':26} {kept:>12}  {verdict}")
    if report:
        print(f"report (the frontier): {report}")


def _console_log_level(args) -> str:
    """Dagster's console: step failures with their tracebacks under --verbose; else nothing (the event log keeps all)."""
    return "WARNING" if args.verbose else "CRITICAL"


ACCURACY = ("median_quantile_error", "large_group_max_quantile_error", "large_group_max_tail_share_error_pp")
"""What the summary shows of a candidate's accuracy: Elina's quantiles over every kept group, over the large ones,
and their tail shares."""


def _print_summary(outcome: PeriodOutcome, home: Path, statuses: dict[str, str], policy) -> None:
    """Per candidate: its status, rows, the worst risk the gate read (value and limit), the accuracy and the
    relationships between measurements it keeps, Elina's answers, its verdict; then the publication, the DP tables,
    the report."""
    source = outcome.source.metadata
    print(f"period {outcome.period}: source {source['rows']:,} rows, {source['subscribers']:,} subscribers, "
          f"sha256 {source['input_sha256'][:16]}…")
    width = max(len("configuration"), *map(len, outcome.releases))
    print(f"{'configuration':{width}} {'status':11} {'released':>10} {'withheld':>9}  {'worst risk / limit':55} "
          f"{'median/large q-err, tail':24}  {'pairs':5}  {'Q1/Q2/Q3':11}  gate")
    for config_id, step in outcome.releases.items():
        meta, evidence = step.metadata, step.evidence
        print(f"{config_id:{width}} {statuses[config_id]:11} {meta['rows_released']:>10,} "
              f"{meta['rows_withheld']:>9,}  {_worst_risk(policy, evidence):55} {_accuracy(evidence):24}  "
              f"{_relationships(evidence):5}  {_answers(evidence):11}  {_verdict(policy, evidence, step)}")
    publication = outcome.publication
    if publication is not None and publication.published:
        print(f"published: {publication.config} -> {publication.step.metadata['path']}")
    elif publication is not None:
        print(f"{_not_published(outcome)}: {'; '.join(publication.refused)}")
    for config_id, verdict in outcome.own_publications.items():
        if verdict.published:
            print(f"published DP tables: {config_id} -> {verdict.path}")
        else:
            print(f"DP tables of {config_id} not published: {'; '.join(verdict.refused)} (epsilon "
                  f"{verdict.epsilon_spent:g} spent)")
    if outcome.report_path is not None:
        print(f"report: {outcome.report_path}")
    print(f"outputs under {home}; open the Dagster UI with: make ui   (or: dsh ui --home {home})")


def _worst_risk(policy, evidence) -> str:
    """The criterion nearest its limit; ", light" when it comes from a light evaluation (a wide interval, on which
    the gate does not decide)."""
    if evidence.is_dp:
        return "n/a (its own criteria)"
    closest = closest_risk(policy, evidence)
    if closest is None:
        return "n/a"
    name, value, limit = closest
    light = ", light" if light_evaluation(evidence, name) else ""
    return f"{value:.4f} / {limit:g} {name}{light}"


def _accuracy(evidence) -> str:
    values = [evidence.utility.get(key) for key in ACCURACY]
    if all(value is None for value in values):
        return "n/a"
    median, large, tail = ("n/a" if value is None else f"{value:.3f}" if key != ACCURACY[2] else f"{value:.2f} pp"
                           for key, value in zip(ACCURACY, values))
    return f"{median} / {large}, {tail}"


def _relationships(evidence) -> str:
    """The largest change of a strong pair's rank correlation: whether a row still holds a session together."""
    value = evidence.utility.get("pair_correlation_max_error")
    return "n/a" if value is None else f"{value:.2f}"


def _answers(evidence) -> str:
    """Q1, Q2 (the same decision) and Q3 the same as on the base data: yes or no each."""
    q2 = (evidence.answers.get("q2") or {})
    same = [(evidence.answers.get("q1") or {}).get("same_answer"), q2.get("same_decision", q2.get("same_answer")),
            (evidence.answers.get("q3") or {}).get("same_answer")]
    return "/".join("yes" if value else "no" for value in same)


def _verdict(policy, evidence, step) -> str:
    """"passes", or "refused (N)" with the number of reasons, for a row-level candidate; the DP release's own."""
    if step.own_publication is not None:
        return "passes" if step.own_publication.published else f"refused ({len(step.own_publication.refused)})"
    _, refused = check_candidate(policy, evidence)
    failed = [name for name, ok in step.checks.items() if not ok]
    reasons = len(refused) + len(failed)
    return "passes" if not reasons else f"refused ({reasons})"


def _not_published(outcome: PeriodOutcome) -> str:
    """"nothing published", or "no row-level release published" when DP tables were."""
    dp_published = any(verdict.published for verdict in outcome.own_publications.values())
    return "no row-level release published" if dp_published else "nothing published"


def cmd_purge(args) -> int:
    from dsh_assets.core.publication.ledger import PublicationLedger
    from dsh_assets.core.retention import DeletionRecord, due, load_retention, purge

    home = _home(args)
    layout = Layout(home)
    policy = load_retention(environment_settings()["releases_file"] or None)
    today = dt.date.fromisoformat(args.today) if args.today else dt.datetime.now(dt.timezone.utc).date()
    with exclusive_lock(layout.dagster_home / RUN_LOCK, on_wait=lambda holder: _stderr(
            f"dsh purge: a dsh run (pid {holder}) is running on {home}; waiting for it to finish")):
        items = due(layout, policy, PublicationLedger(layout.ledger).entries(), today)
        deletions = [] if args.dry_run else purge(layout, items, DeletionRecord(layout.ledger))
    rows = ([item.as_json() for item in items] if args.dry_run else [entry.as_json() for entry in deletions])
    if args.json:
        print(json.dumps({"today": today.isoformat(), "dry_run": args.dry_run,
                          "due" if args.dry_run else "deleted": rows}, indent=2))
    else:
        verb = "would delete" if args.dry_run else "deleted"
        for row in rows:
            print(f"{verb} {row['kind']:10} {row['period']} {row['config'] or '-':28} {row['path']}")
        print(f"{len(rows)} file(s) {verb} (retention evaluated on {today.isoformat()})")
    return 0


def cmd_verify(args) -> int:
    from dsh_assets.definitions import settings_from_environment
    from dsh_assets.graph.verification import verify_home

    home = settings_from_environment(home=str(_home(args)))
    verification = verify_home(home)
    if args.json:
        print(json.dumps(verification.as_json(), indent=2))
    else:
        _print_verification(verification)
    for problem in verification.problems:
        _stderr(f"dsh verify: {problem}")
    if not verification.releases and not verification.quarantined:
        _stderr(f"dsh verify: no stored release under {home.layout.home}")
    return 0 if verification.ok else 1


def _print_verification(verification: Verification) -> None:
    for row in verification.releases:
        print(f"{row.status:<44} {row.config}|{row.period}  {row.path}")
    for row in verification.published:
        print(f"{row.status:<44} published {row.config}|{row.period}  {row.path}")
    for row in verification.reports:
        print(f"{row.status:<44} report {row.period}  {row.path}")
    for row in verification.quarantined:
        print(f"{'quarantined':<44} {row.config}|{row.period}  failed: {', '.join(row.failed_checks)}")
    print(f"{len(verification.releases)} stored release(s), {len(verification.published)} publication(s), "
          f"{len(verification.reports)} report(s), {len(verification.quarantined)} quarantined, "
          f"{len(verification.deleted)} deleted file(s), {len(verification.problems)} problem(s)")


def cmd_report(args) -> int:
    from dsh_assets.definitions import build_defs, settings_from_environment
    from dsh_assets.graph.instance import open_instance
    from dsh_assets.graph.partitions import PERIODS
    from dsh_assets.graph.runner import run_report

    home = _home(args)
    settings = settings_from_environment(home=str(home))
    defs = build_defs(settings)
    period = args.period or latest_ended_period(_now(), settings.cadence)
    instance = open_instance(Layout(home))
    if not instance.has_dynamic_partition(PERIODS.name, period):
        raise ValueError(f"period {period} has no source in {home}; release it first with dsh run --period {period}")
    outcome = run_report(defs, instance, period, progress=_stderr, log_level=_console_log_level(args))
    if not outcome.success:
        _stderr(f"dsh report: {'; '.join(outcome.errors)}")
        return 1
    print(outcome.metadata["path"])
    return 0


def cmd_budget(args) -> int:
    from dsh_assets.definitions import settings_from_environment
    from dsh_assets.graph.resources import resources_for

    settings = settings_from_environment(home=str(_home(args)))
    ledger = resources_for(settings)["ledger"].ledger(args.slice)
    period = args.period or latest_ended_period(_now(), settings.cadence)
    status = ledger.status(period)
    entries = [{key: entry[key] for key in ("id", "config", "period", "epsilon", "status", "reserved_at",
                                            "published_at", "sha256")} for entry in ledger.entries()]
    if args.json:
        print(json.dumps({"ledger": str(ledger.path), "status": status, "entries": entries}, indent=2))
        return 0
    print(f"ledger {ledger.path}")
    print(f"{'id':>4} {'config':28} {'period':10} {'epsilon':>8} {'status':12} {'published_at':25} sha256")
    for entry in entries:
        print(f"{entry['id']:>4} {entry['config']:28} {entry['period']:10} {entry['epsilon']:>8g} "
              f"{entry['status']:12} {entry['published_at'] or '-':25} {(entry['sha256'] or '-')[:16]}")
    print(f"period {status['period']}: used {status['period_used']:g} of {status['period_cap']:g} "
          f"(renews {status['period_renews']}); year {status['year']}: used {status['year_used']:g} of "
          f"{status['year_cap']:g} (renews {status['year_renews']})")
    return 0


def cmd_ui(args) -> int:
    from dsh_assets.definitions import settings_from_environment
    from dsh_assets.graph.instance import prepare_dagster_home

    home = _home(args)
    export("DSH_HOME", str(home))
    dagster_home = prepare_dagster_home(Layout(home), settings_from_environment(home=str(home)).workers)
    # A non-interactive parent may have left SIGINT ignored; dagster dev would inherit that.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    # The code location named here rather than by workspace.yaml, whose module path is relative to the working
    # folder: dagster dev runs in DAGSTER_HOME, and no longer warns that the checkout's dagster.yaml is unused.
    command = [str(Path(sys.executable).with_name("dagster")), "dev", "-m", "dsh_assets.definitions", "-a", "defs",
               "-d", str(CHECKOUT), "-h", "127.0.0.1", "-p", str(args.port)]
    _stderr(f"Dagster UI on http://127.0.0.1:{args.port} (home {home}); Ctrl-C stops it")
    os.chdir(dagster_home)
    os.execv(command[0], command)


def _add_run_command(commands) -> None:
    run = commands.add_parser("run", help="materialise the source and the release partitions of a period")
    run.add_argument("--source", help="a Parquet file (default: the synthetic source)")
    run.add_argument("--period", type=_period,
                     help="release period YYYY-MM-DD, its first day: any past period (default: the latest ended one)")
    run.add_argument("--config", action="append", help="configuration id (repeatable; default: all)")
    run.add_argument("--home", help="home folder (default: $DSH_HOME or .dsh_home in the checkout)")
    run.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    run.add_argument("--engine", choices=ENGINES,
                     help="where ingest and the releases run (default: $DSH_ENGINE, else duckdb; spark: "
                          "$DSH_SPARK_REMOTE sc://host:port, else $DSH_SPARK_MASTER, default local[2])")
    run.add_argument("--republish", action="store_true",
                     help="draw and publish DP tables again even if this period has one (debits the budget again)")
    run.add_argument("--publish", metavar="ID", help="publish this configuration (default: [publication] config)")
    run.add_argument("--also-publish", action="store_true",
                     help="allow a further row-level publication of the period if the pair evidence passes the gate")
    run.add_argument("--require-publication", action="store_true",
                     help=f"exit {EXIT_NOT_PUBLISHED} when the gate refuses the publication (for schedulers)")
    run.add_argument("--workers", type=_workers,
                     help="candidates evaluated at once, each in a process of its own (default: $DSH_WORKERS, else "
                          "one per core); DuckDB's memory limit is shared between them")
    run.set_defaults(handler=cmd_run)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dsh", description=__doc__)
    parser.add_argument("--verbose", action="store_true",
                        help="print full tracebacks on stderr (they are always in the Dagster event log)")
    commands = parser.add_subparsers(dest="command", required=True)

    synth = commands.add_parser("synth", help="write a deterministic synthetic source")
    synth.add_argument("--out", required=True)
    synth.add_argument("--rows", type=int, default=DEFAULT_ROWS)
    synth.add_argument("--subscribers", type=int, default=DEFAULT_SUBSCRIBERS)
    synth.add_argument("--seed", type=int, default=DEFAULT_SEED)
    synth.add_argument("--period", type=_period, default=dt.date.today().isoformat())
    synth.add_argument("--json", action="store_true")
    synth.set_defaults(handler=cmd_synth)

    _add_run_command(commands)

    sweep = commands.add_parser("sweep", help="evaluate every point of the [sweep.*] tables as a candidate of a "
                                              "period (nothing is published) and draw the risk-utility frontier")
    sweep.add_argument("--source", help="a Parquet file (default: the synthetic source), when the period has none")
    sweep.add_argument("--period", type=_period, help="release period YYYY-MM-DD (default: the latest ended one)")
    sweep.add_argument("--home", help="home folder (default: $DSH_HOME or .dsh_home in the checkout)")
    sweep.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    sweep.set_defaults(handler=cmd_sweep)

    verify = commands.add_parser("verify", help="re-hash every stored release against the recorded metadata")
    verify.add_argument("--home")
    verify.add_argument("--json", action="store_true")
    verify.set_defaults(handler=cmd_verify)

    purge = commands.add_parser("purge", help="delete what the [retention] periods make due, recording each deletion")
    purge.add_argument("--home")
    purge.add_argument("--dry-run", action="store_true", help="print what is due; delete nothing")
    purge.add_argument("--today", type=_period, help="evaluate retention on this date YYYY-MM-DD (default: today, UTC)")
    purge.add_argument("--json", action="store_true")
    purge.set_defaults(handler=cmd_purge)

    report = commands.add_parser("report", help="write the period's self-contained HTML report; print its path")
    report.add_argument("--period", type=_period, help="release period (default: the latest complete one)")
    report.add_argument("--home")
    report.set_defaults(handler=cmd_report)

    budget = commands.add_parser("budget", help="print the privacy-budget ledger")
    budget.add_argument("--home")
    budget.add_argument("--period", type=_period, help="status of this period (default: the latest complete one)")
    budget.add_argument("--json", action="store_true")
    budget.add_argument("--slice", choices=(DP_COUNTS, DP_SYNTHETIC), default=DP_COUNTS,
                        help="the budget slice: the DP counts' (default) or the DP synthetic tables' own")
    budget.set_defaults(handler=cmd_budget)

    ui = commands.add_parser("ui", help="start the Dagster UI on 127.0.0.1")
    ui.add_argument("--home")
    ui.add_argument("--port", type=int, default=3000)
    ui.set_defaults(handler=cmd_ui)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except (SourceError, ConfigError, SecretsError, AnonymeterUnavailable, ValueError, FileNotFoundError) as error:
        if args.verbose:
            traceback.print_exc()
        _stderr(f"dsh {args.command}: {error}")
        return 2
    except Exception as error:  # a fault, not a refusal: one line, the traceback under --verbose
        if args.verbose:
            traceback.print_exc()
        _stderr(f"dsh {args.command}: {_fault(error, args)}")
        return 1


def _fault(error: BaseException, args) -> str:
    """One line for an unexpected error; a full disk under the home is named as such (SQLite only says "disk I/O")."""
    described = f"{type(error).__name__}: {error}".splitlines()[0]
    home = Path(getattr(args, "home", None) or environment_settings()["home"]).resolve()
    chain, cause = [], error
    while cause is not None and len(chain) < 20:
        chain.append(cause)
        cause = cause.__cause__ or cause.__context__
    full = any(getattr(e, "errno", None) == errno.ENOSPC or "No space left" in str(e) for e in chain)
    try:
        free = shutil.disk_usage(home).free
    except OSError:
        free = None
    if full or (free is not None and free < LOW_DISK_BYTES):
        where = f" ({free:,} bytes free under {home})" if free is not None else ""
        return f"disk full{where}; stopped by {described}"
    return f"{described} (dsh --verbose {args.command} ... prints the traceback)"


if __name__ == "__main__":
    sys.exit(main())
