"""Every Python block of the README and of docs/ runs, or says why it cannot; every relative link resolves.

Documentation that is not executed rots: a renamed argument or a variable the prose forgot to define
turns an example into a traceback for the first reader who copies it. The convention, stated in
docs/index.md: a page reads as one session from top to bottom, so a page's ```python blocks run in
order, as one script, in a fresh interpreter (a subprocess with a timeout) in an empty directory, and
each block is reported on its own: it ran, it failed (with its traceback), or a block above it failed.
A block that cannot run here (a GPU, hub weights, a cluster, the embodied simulator stack) has an HTML
comment right above its fence, ``<!-- sketch: why it does not run here -->``, and is only checked for
being marked.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))
PYTHON_INFO = frozenset({"python", "py", "python3"})
SKETCH = re.compile(r"^ {0,3}<!--\s*sketch:(?P<reason>.*?)-->\s*$")
OPENING_FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)$")
PAGE_TIMEOUT_S = 300
DONE = "wmrl-docs: finished "


@dataclass(frozen=True)
class Block:
    """One fenced code block of a page.

    Attributes:
        page: the Markdown file.
        line: 1-based line of the opening fence.
        language: the first word of the fence's info string, lower-cased ("" for none).
        code: the block's text, the fence's indentation removed.
        sketch: the reason of the ``<!-- sketch: ... -->`` comment right above the fence, else None.
    """

    page: Path
    line: int
    language: str
    code: str
    sketch: str | None

    @property
    def name(self) -> str:
        page = self.page.relative_to(ROOT) if self.page.is_relative_to(ROOT) else self.page.name
        return f"{page}:{self.line}"


def fenced_blocks(page: Path) -> list[Block]:
    """The fenced code blocks of ``page``, as CommonMark reads them (a fence closes on a line of its own)."""
    lines = page.read_text().splitlines()
    blocks: list[Block] = []
    index = 0
    while index < len(lines):
        opening = OPENING_FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        fence, indent = opening["fence"], len(opening["indent"])
        closing = re.compile(rf"^ {{0,3}}{re.escape(fence[0])}{{{len(fence)},}}\s*$")
        end = next((k for k in range(index + 1, len(lines)) if closing.match(lines[k])), len(lines))
        body = [re.sub(rf"^ {{0,{indent}}}", "", line) for line in lines[index + 1 : end]]
        above = next((lines[k] for k in range(index - 1, -1, -1) if lines[k].strip()), "")
        marker = SKETCH.match(above)
        words = opening["info"].split()
        blocks.append(
            Block(
                page=page,
                line=index + 1,
                language=words[0].lower() if words else "",
                code="\n".join(body) + "\n",
                sketch=marker["reason"].strip() if marker else None,
            )
        )
        index = end + 1
    return blocks


def python_blocks(page: Path) -> list[Block]:
    return [block for block in fenced_blocks(page) if block.language in PYTHON_INFO]


def runnable(page: Path) -> list[Block]:
    """The Python blocks of ``page`` that run here: every one not marked as a sketch, in page order."""
    return [block for block in python_blocks(page) if block.sketch is None]


RUNNABLE = [block for page in PAGES for block in runnable(page)]


def test_the_block_reader_sees_a_fence_inside_a_string_as_code(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "<!-- sketch: needs a GPU -->\n```python\nx = 1\n```\n\n   ```python\n   "
        'reply = "```python\\n...\\n```"\n   ```\n'
    )
    sketch, indented = python_blocks(page)
    assert (sketch.sketch, sketch.code) == ("needs a GPU", "x = 1\n")
    assert (indented.sketch, indented.code) == (None, 'reply = "```python\\n...\\n```"\n')


def test_every_python_block_is_run_here_or_marked_as_a_sketch_with_its_reason() -> None:
    every = [block for page in PAGES for block in python_blocks(page)]
    sketches = [block for block in every if block.sketch is not None]
    assert {block.name for block in RUNNABLE} | {block.name for block in sketches} == {b.name for b in every}
    unexplained = [block.name for block in sketches if len(block.sketch or "") < 10]
    assert not unexplained, f"a sketch marker must say why the block does not run: {unexplained}"
    assert RUNNABLE, "no Python block of the docs is executed"


def test_a_sketch_marker_sits_right_above_a_python_block() -> None:
    stray = []
    for page in PAGES:
        marked = {block.line for block in python_blocks(page) if block.sketch is not None}
        lines = page.read_text().splitlines()
        for number, line in enumerate(lines, start=1):
            if SKETCH.match(line):
                following = next((k for k in range(number, len(lines)) if lines[k].strip()), None)
                if following is None or following + 1 not in marked:
                    stray.append(f"{page.relative_to(ROOT)}:{number}")
    assert not stray, f"sketch markers that mark no Python block (an edit separated them): {stray}"


@dataclass(frozen=True)
class Session:
    """One run of a page's runnable blocks, in order, in one fresh interpreter.

    Attributes:
        finished: how many of the page's blocks ran to their end.
        returncode: the interpreter's exit status; None when it ran past the timeout and was killed.
        stderr: what it wrote to stderr (the failing block's traceback).
    """

    finished: int
    returncode: int | None
    stderr: str

    def report(self, block: Block, position: int) -> str | None:
        """Why ``block``, the ``position``-th runnable block of its page, did not run; None if it did."""
        if position < self.finished:
            return None
        if position > self.finished:
            return f"{block.name} was not reached: a block above it on the page failed"
        errors = "\n".join(line for line in self.stderr.splitlines() if not line.startswith(DONE))
        status = "timed out" if self.returncode is None else f"exit status {self.returncode}"
        return f"{block.name} failed ({status}):\n{errors[-3000:]}"


@functools.cache
def session(page: Path, timeout_s: float = PAGE_TIMEOUT_S) -> Session:
    """Run ``page``'s runnable blocks as one script in an empty directory; note how far it got."""
    parts = []
    for block in runnable(page):
        parts.append(block.code)
        parts.append(f"__import__('sys').stderr.write({DONE + block.name!r} + '\\n')\n")
    environment = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "MPLBACKEND": "Agg"}
    with tempfile.TemporaryDirectory(prefix="wmrl-docs-") as directory:
        script = Path(directory) / "session.py"
        script.write_text("\n".join(parts))
        returncode: int | None
        try:
            done = subprocess.run(
                [sys.executable, str(script)],
                cwd=directory,
                env=environment,
                capture_output=True,
                text=True,
                timeout=timeout_s,
            )
            returncode, stderr = done.returncode, done.stderr
        except subprocess.TimeoutExpired as exc:
            partial = exc.stderr or ""
            returncode = None
            stderr = (partial.decode(errors="replace") if isinstance(partial, bytes) else partial) + (
                f"\nkilled after {timeout_s} s"
            )
    finished = sum(line.startswith(DONE) for line in stderr.splitlines())
    return Session(finished, returncode, stderr)


def test_a_failing_block_is_reported_with_its_traceback_and_the_blocks_below_as_not_reached(
    tmp_path: Path,
) -> None:
    page = tmp_path / "page.md"
    fence = "```"
    page.write_text(
        f"{fence}python\nanswer = 41\n{fence}\n\n<!-- sketch: would fail if it ran -->\n{fence}python\n"
        f"raise RuntimeError('sketch ran')\n{fence}\n\n"
        f"{fence}python\nassert answer == 42, answer\n{fence}\n\n{fence}python\nprint('below')\n{fence}\n"
    )
    first, failing, below = runnable(page)
    result = session(page)
    assert result.finished == 1 and result.returncode == 1
    assert result.report(first, 0) is None
    assert "AssertionError: 41" in (result.report(failing, 1) or "")
    assert "not reached" in (result.report(below, 2) or "")
    assert "sketch ran" not in result.stderr


def test_a_block_that_hangs_is_killed_at_the_timeout_and_reported(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("```python\nimport time\ntime.sleep(60)\n```\n")
    result = session(page, timeout_s=2)
    assert (result.finished, result.returncode) == (0, None)
    assert "timed out" in (result.report(runnable(page)[0], 0) or "")


@pytest.mark.parametrize("block", RUNNABLE, ids=[block.name for block in RUNNABLE])
def test_docs_python_block_runs(block: Block) -> None:
    failure = session(block.page).report(block, runnable(block.page).index(block))
    if failure is not None:
        pytest.fail(failure)


LINK = re.compile(r"!?\[[^\]]*\]\((?P<target>[^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^#{1,6}\s+(?P<title>.+?)\s*#*\s*$")
HTML_ANCHOR = re.compile(r"<a\s+(?:id|name)=\"(?P<anchor>[^\"]+)\"")


def outside_fences(page: Path) -> list[str]:
    """The lines of ``page`` with its fenced blocks blanked (a ``#`` or a link in code is code)."""
    lines = page.read_text().splitlines()
    for block in fenced_blocks(page):
        end = block.line + block.code.count("\n")
        lines[block.line - 1 : end + 1] = [""] * (end + 2 - block.line)
    return lines


def prose(page: Path) -> str:
    """``page`` without its fenced blocks and inline code, where a link is text, not a link."""
    return re.sub(r"`[^`\n]*`", "", "\n".join(outside_fences(page)))


def anchors(page: Path) -> set[str]:
    """The anchors GitHub gives ``page``: a slug per heading (``-1``, ``-2`` for repeats), and ``<a id>``."""
    found: set[str] = set(HTML_ANCHOR.findall(page.read_text()))
    counts: dict[str, int] = {}
    for line in outside_fences(page):
        heading = HEADING.match(line)
        if heading is None:
            continue
        title = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading["title"])
        slug = re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")
        found.add(slug if slug not in counts else f"{slug}-{counts[slug]}")
        counts[slug] = counts.get(slug, 0) + 1
    return found


def broken_links(page: Path) -> list[str]:
    broken = []
    for match in LINK.finditer(prose(page)):
        target = match["target"]
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            broken.append(f"{target} (no such file)")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            broken.append(f"{target} (no heading gives #{anchor})")
    return broken


def test_the_link_checker_finds_a_missing_file_and_a_missing_heading(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Other page\n\n## The `wmrl` command, again\n")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](other.md#the-wmrl-command-again) [top](#a-page) [gone](missing.md) "
        "[no heading](other.md#nowhere) [web](https://example.org) `[code](nowhere.md)`\n\n# A page\n"
    )
    assert broken_links(page) == ["missing.md (no such file)", "other.md#nowhere (no heading gives #nowhere)"]


@pytest.mark.parametrize("page", PAGES, ids=[str(page.relative_to(ROOT)) for page in PAGES])
def test_every_relative_link_resolves_to_a_file_and_heading(page: Path) -> None:
    assert not broken_links(page), broken_links(page)


def test_the_glossary_counts_the_reference_population_the_code_has() -> None:
    from wmrl_envs.kaggle.references import REFERENCE_NAMES

    glossary = (ROOT / "docs" / "index.md").read_text().split("### Reference population", 1)[1]
    definition = glossary.split("\n#", 1)[0]
    assert f"The {len(REFERENCE_NAMES)} reference solutions" in definition
