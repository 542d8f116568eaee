"""What the documentation names exists: every dotted `dsh_assets...` name and every core/graph module path."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

import dsh_assets

CHECKOUT = Path(dsh_assets.__file__).parent.parent
DOCUMENTS = [CHECKOUT / "README.md", CHECKOUT / "benchmarks" / "README.md", *sorted((CHECKOUT / "docs").glob("*.md"))]


def resolves(dotted: str) -> bool:
    """A module, or an attribute of the longest module the name starts with."""
    parts = dotted.split(".")
    for length in range(len(parts), 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:length]))
        except ImportError:
            continue
        for name in parts[length:]:
            if not hasattr(found, name):
                return False
            found = getattr(found, name)
        return True
    return False


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: str(path.relative_to(CHECKOUT)))
def test_every_module_a_document_names_exists(document):
    text = document.read_text(encoding="utf-8")
    names = sorted(set(re.findall(r"\bdsh_assets(?:\.\w+)+", text)))
    paths = sorted(set(re.findall(r"`((?:core|graph)/[\w/]+\.py)", text)))
    missing = [name for name in names if not resolves(name)]
    missing += [path for path in paths if not (CHECKOUT / "dsh_assets" / path).is_file()]
    assert missing == [], f"{document.relative_to(CHECKOUT)} names what no longer exists: {missing}"
