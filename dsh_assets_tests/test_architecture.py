"""The import rules of docs/architecture.md, read from the source: the core's domains import one another one way
only, and the core imports neither Dagster nor the shell."""

from __future__ import annotations

import ast
from pathlib import Path

import dsh_assets

CORE = Path(dsh_assets.__file__).parent / "core"


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


def test_the_core_imports_neither_dagster_nor_the_shell():
    found = {path.relative_to(CORE).as_posix(): sorted(m for m in imported_modules(path)
                                                      if m.split(".")[0] == "dagster" or m.startswith("dsh_assets.graph"))
             for path in sorted(CORE.rglob("*.py"))}
    assert {path: modules for path, modules in found.items() if modules} == {}
