"""The README is a front page: its Python examples run as written, alone, and it reads in five minutes.

Each block runs on its own here (a reader copies one block from the front page); tests/test_docs.py
also runs them in order, as the README's session, like every other page's.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)


def test_readme_has_a_python_example() -> None:
    assert BLOCKS


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_python_example_runs(index: int, tmp_path: Path) -> None:
    script = tmp_path / "example.py"
    script.write_text(BLOCKS[index])
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip(), "the example prints what it computed"


SETUP_COMMANDS = """```bash
bash scripts/install.sh && wmrl train    # install, then train a code agent on the embedded Kaggle suite
bash scripts/test.sh                     # install the test profile, start its services, run the tests
```"""


def test_readme_keeps_its_two_setup_commands_as_ci_runs_them() -> None:
    text = README.read_text()
    assert "## Set-up: two commands" in text and SETUP_COMMANDS in text
    ci = (README.parent / ".ci" / "run").read_text()
    assert "bash scripts/test.sh" in ci


def test_readme_is_a_front_page_of_at_most_120_lines() -> None:
    assert len(README.read_text().splitlines()) <= 120
