"""docs/extending.md stays true: every `python` block of it runs, in order, in one namespace."""

import re
from pathlib import Path

import pytest

import dsh_assets

GUIDE = Path(dsh_assets.__file__).parent.parent / "docs" / "extending.md"


def python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```$", text, flags=re.MULTILINE | re.DOTALL)


def run_blocks(text: str, tmp_path: Path) -> int:
    """Run every python block of ``text`` in one namespace with ``tmp_path``; how many ran."""
    namespace = {"tmp_path": tmp_path, "__name__": "extending_guide"}
    blocks = python_blocks(text)
    for number, block in enumerate(blocks, start=1):
        exec(compile(block, f"{GUIDE.name}, python block {number}", "exec"), namespace)
    return len(blocks)


def test_the_guides_examples_run(tmp_path):
    assert run_blocks(GUIDE.read_text(encoding="utf-8"), tmp_path) >= 5, "the guide's worked examples are gone"


def test_a_failing_example_fails_the_test(tmp_path):
    with pytest.raises(AssertionError):
        run_blocks("text\n```python\nx = 1\n```\nmore\n```python\nassert x == 2\n```\n", tmp_path)
