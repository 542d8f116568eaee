"""The rules of docs/architecture.md, read from the source: the core's domains import one another one way only, the
core imports neither Dagster nor the shell, and nothing is defined that nothing reads."""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

import dsh_assets

PACKAGE = Path(dsh_assets.__file__).parent
CORE = PACKAGE / "core"
READERS = (PACKAGE, PACKAGE.parent / "dsh_assets_tests", PACKAGE.parent / "benchmarks")
"""Where a name of the package may be read: the package, its tests and the benchmarks."""


def imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports, at the top or inside a function (``from a import b`` gives a and a.b)."""
    modules = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            modules.add(node.module)
            modules.update(f"{node.module}.{alias.name}" for alias in node.names)
    return modules


def domain_of(module: str) -> str | None:
    """The core domain (a package under dsh_assets/core) a module belongs to; None for any other module."""
    parts = module.split(".")
    return parts[2] if parts[:2] == ["dsh_assets", "core"] and len(parts) > 3 and (CORE / parts[2]).is_dir() else None


def domain_imports() -> dict[str, dict[str, set[str]]]:
    """Domain -> the other domains its modules import -> which of its modules do."""
    imports: dict[str, dict[str, set[str]]] = {}
    for path in sorted(CORE.glob("*/*.py")):
        domain = path.parent.name
        for module in imported_modules(path):
            other = domain_of(module)
            if other is not None and other != domain:
                imports.setdefault(domain, {}).setdefault(other, set()).add(path.relative_to(CORE).as_posix())
    return imports


def test_no_core_domain_imports_one_that_imports_it_back():
    imports = domain_imports()

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        return any(other == goal or (other not in seen and reaches(other, goal, seen | {other}))
                   for other in imports.get(start, {}))

    back = {f"{domain} -> {other} ({', '.join(sorted(modules))})"
            for domain, others in imports.items() for other, modules in others.items()
            if reaches(other, domain, {other})}
    assert back == set(), f"imports running back up: {sorted(back)}"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_no_module_imports_one_that_imports_it_back():
    """Within a domain too, and through imports inside functions (a lazy import only hides a circle)."""
    modules = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}
    imports = {name: {m for m in imported_modules(path) if m in modules and m != name and m != "dsh_assets"}
               for name, path in modules.items()}

    def reachable(start: str) -> set[str]:
        seen, stack = set(), [start]
        while stack:
            for other in imports[stack.pop()] - seen:
                seen.add(other)
                stack.append(other)
        return seen

    circles = {f"{name} -> {other}" for name in modules for other in imports[name] if name in reachable(other)}
    assert circles == set(), f"modules that import each other: {sorted(circles)}"


def test_the_core_imports_neither_dagster_nor_the_shell():
    found = {path.relative_to(CORE).as_posix(): sorted(m for m in imported_modules(path)
                                                      if m.split(".")[0] == "dagster" or m.startswith("dsh_assets.graph"))
             for path in sorted(CORE.rglob("*.py"))}
    assert {path: modules for path, modules in found.items() if modules} == {}


def test_nothing_imports_a_private_module_of_dagster():
    """Dagster's public API only (`pyproject.toml` names a range of its releases): no ``dagster._...`` import in the
    package, its tests or the benchmarks, nor of any other package of the family (``dagster_shared._...``)."""
    found = {path.relative_to(PACKAGE.parent).as_posix(): sorted(
        m for m in imported_modules(path)
        if m.split(".")[0].startswith("dagster") and any(part.startswith("_") for part in m.split(".")[1:]))
        for reader in READERS for path in sorted(reader.rglob("*.py"))}
    assert {path: modules for path, modules in found.items() if modules} == {}


def module_level_names(path: Path) -> list[str]:
    """The functions, classes and constants a module defines at its top level (dunder names aside)."""
    names = []
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, ast.Assign):
            names += [target.id for target in node.targets if isinstance(target, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.append(node.target.id)
    return [name for name in names if not name.startswith("__")]


def test_every_name_the_package_defines_is_read_somewhere():
    definitions = Counter(name for path in sorted(PACKAGE.rglob("*.py")) for name in module_level_names(path))
    text = "\n".join(path.read_text(encoding="utf-8") for folder in READERS for path in sorted(folder.rglob("*.py")))
    words = Counter(re.findall(r"\w+", text))
    unread = sorted(name for name, defined in definitions.items() if words[name] <= defined)
    assert unread == [], f"defined and read nowhere: {unread}"


def private_names_imported(path: Path) -> list[str]:
    """Private names (one leading underscore) ``path`` takes from another module of the package: imported by name, or
    read as an attribute of a package module it imported."""
    found, modules = [], {}
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("dsh_assets"):
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    found.append(f"{node.module}.{alias.name}")
                modules[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Import):
            modules.update({alias.asname or alias.name.split(".")[0]: alias.name for alias in node.names
                            if alias.name.startswith("dsh_assets")})
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules
                and node.attr.startswith("_") and not node.attr.startswith("__")):
            found.append(f"{modules[node.value.id]}.{node.attr}")
    return found


def test_no_module_imports_a_private_name_of_another():
    found = {path.relative_to(PACKAGE).as_posix(): names
             for path in sorted(PACKAGE.rglob("*.py")) if (names := private_names_imported(path))}
    assert found == {}, f"private names used across modules: {found}"


ENVIRONMENT_READERS = {
    "settings.py": "every setting of a home",
    "core/secrets.py": "the secrets, which no setting, output or metadata may hold",
    "graph/instance.py": "the PostgreSQL URL Dagster's instance file reads itself",
}


def environment_reads(path: Path) -> list[int]:
    """The lines of ``path`` that read the process environment (``os.environ[...]``/``.get``, ``os.getenv``)."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and (
                node.func.attr == "getenv" or (node.func.attr == "get" and _is_environ(node.func.value))):
            lines.append(node.lineno)
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and _is_environ(node.value):
            lines.append(node.lineno)
    return lines


def _is_environ(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "environ") or (
        isinstance(node, ast.Name) and node.id == "environ")


ENVIRONMENT_WRITER = "core/environment.py"


def environment_writes(path: Path) -> list[int]:
    """The lines of ``path`` that write the process environment: ``os.environ[...] = ``, ``del os.environ[...]``,
    ``os.environ.setdefault/update/pop/clear``, ``os.putenv``, ``os.unsetenv``."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, (ast.Store, ast.Del)) and _is_environ(node.value):
            lines.append(node.lineno)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and (
                node.func.attr in {"putenv", "unsetenv"} or (
                node.func.attr in {"setdefault", "update", "pop", "popitem", "clear"} and _is_environ(node.func.value))):
            lines.append(node.lineno)
    return lines


HISTORY_READERS = {"graph/release/checks.py", "graph/verification.py"}
"""The modules that read Dagster's event log for earlier materialisations (``history.recorded_metadata``)."""


def test_the_latest_value_of_a_fact_is_read_from_the_record_store():
    """The event log holds the same values for the UI; code reads it only for what came before."""
    readers = {relative for path in sorted(PACKAGE.rglob("*.py"))
               if (relative := path.relative_to(PACKAGE).as_posix()) != "graph/history.py"
               and "recorded_metadata" in path.read_text(encoding="utf-8")}
    assert readers == HISTORY_READERS


def test_the_environment_is_written_in_one_place():
    found = {relative: lines for path in sorted(PACKAGE.rglob("*.py"))
             if (relative := path.relative_to(PACKAGE).as_posix()) != ENVIRONMENT_WRITER
             and (lines := environment_writes(path))}
    assert found == {}, f"the environment written outside {ENVIRONMENT_WRITER}: {found}"
    assert environment_writes(PACKAGE / ENVIRONMENT_WRITER), "the one writer writes nothing: this test sees nothing"


def test_settings_are_read_from_the_environment_in_one_place():
    found = {relative: lines for path in sorted(PACKAGE.rglob("*.py"))
             if (relative := path.relative_to(PACKAGE).as_posix()) not in ENVIRONMENT_READERS
             and (lines := environment_reads(path))}
    assert found == {}, f"the environment read outside {sorted(ENVIRONMENT_READERS)}: {found}"


TESTS = PACKAGE.parent / "dsh_assets_tests"
UNMIRRORED = frozenset({
    "definitions.py", "graph/dp/assets.py", "graph/evidence/assets.py", "graph/privacy/assets.py",
    "graph/publication/assets.py", "graph/utility/assets.py",
})
"""Modules with no test file at the mirrored path yet (they are tested through others, e.g. the graph's assets
through graph/release/test_assets.py): a list that only shrinks."""


def test_the_tests_mirror_the_package():
    """A module's tests sit at its mirrored path (core/release/transform.py: core/release/test_transform.py); a new
    module comes with its test file, and a module that gains one leaves UNMIRRORED."""
    modules = {path.relative_to(PACKAGE).as_posix() for path in PACKAGE.rglob("*.py") if path.name != "__init__.py"}
    mirrored = {module for module in modules
                if (TESTS / Path(module).parent / f"test_{Path(module).name}").is_file()}
    assert sorted(modules - mirrored - UNMIRRORED) == [], "a module without a test file at its mirrored path"
    assert sorted(UNMIRRORED & mirrored) == [], "mirrored now: remove from UNMIRRORED"
    assert sorted(UNMIRRORED - modules) == [], "no longer a module: remove from UNMIRRORED"
