"""The host-side work dir: safe copy-out of the output file, removal after hostile runs, the disk cap."""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path

import pytest

from wmrl_envs.sandbox.workdir import OutputStore, WorkDir, copy_out, remove_tree


def test_regular_output_file_is_copied_byte_for_byte(tmp_path: Path) -> None:
    (tmp_path / "submission.csv").write_bytes(b"id,y\n1,0.5\n")
    copied = copy_out(tmp_path, "submission.csv", tmp_path / "copy.csv", max_bytes=1000)
    assert copied.rejected is None and copied.path == tmp_path / "copy.csv"
    assert copied.path.read_bytes() == b"id,y\n1,0.5\n"


def test_missing_output_is_neither_copied_nor_rejected(tmp_path: Path) -> None:
    copied = copy_out(tmp_path, "submission.csv", tmp_path / "copy.csv", max_bytes=1000)
    assert (copied.path, copied.rejected) == (None, None)


def test_symlinked_output_is_rejected_and_its_target_never_read(tmp_path: Path) -> None:
    secret = tmp_path / "answers.csv"
    secret.write_text("hidden")
    (tmp_path / "submission.csv").symlink_to(secret)
    copied = copy_out(tmp_path, "submission.csv", tmp_path / "copy.csv", max_bytes=1000)
    assert copied.path is None and copied.rejected is not None and "symlink" in copied.rejected
    assert not (tmp_path / "copy.csv").exists()


def test_fifo_output_is_rejected_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "submission.csv")
    outcome: list[object] = []
    worker = threading.Thread(
        target=lambda: outcome.append(copy_out(tmp_path, "submission.csv", tmp_path / "c", max_bytes=10)),
        daemon=True)
    worker.start()
    worker.join(timeout=5)
    assert outcome, "copy_out blocked on a FIFO"
    assert outcome[0].path is None and "not a regular file" in outcome[0].rejected  # type: ignore[attr-defined]


def test_oversized_output_is_rejected(tmp_path: Path) -> None:
    (tmp_path / "submission.csv").write_bytes(b"x" * 2000)
    copied = copy_out(tmp_path, "submission.csv", tmp_path / "copy.csv", max_bytes=1000)
    assert copied.path is None and "cap" in (copied.rejected or "")


@pytest.mark.parametrize("name", ["../submission.csv", "a/b.csv", "", "..", "."])
def test_output_names_that_are_not_plain_file_names_are_rejected(tmp_path: Path, name: str) -> None:
    copied = copy_out(tmp_path, name, tmp_path / "copy.csv", max_bytes=1000)
    assert copied.path is None and "plain file name" in (copied.rejected or "")


def test_tree_with_chmod_000_directories_is_removed(tmp_path: Path) -> None:
    root = tmp_path / "hostile"
    for i in range(20):
        deep = root / str(i) / "deep"
        deep.mkdir(parents=True)
        (deep / "f").write_text("x")
        os.chmod(deep, 0)
        os.chmod(deep.parent, 0)
    os.chmod(root, 0)
    remove_tree(root)
    assert not root.exists()


def test_output_store_removes_only_its_own_private_dir(tmp_path: Path) -> None:
    private = OutputStore(None)
    first, second = private.new_path("s.csv"), private.new_path("s.csv")
    assert first != second and first.parent == private.directory
    private.close()
    assert not private.directory.exists()
    owned = OutputStore(tmp_path / "mine")
    owned.close()
    assert (tmp_path / "mine").is_dir()


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting the capped tmpfs needs root")
def test_capped_work_dir_stops_a_disk_fill_and_is_unmounted() -> None:
    work = WorkDir(disk_mb=4, capped=True)
    try:
        result = subprocess.run(["dd", "if=/dev/zero", f"of={work.work}/big", "bs=1M", "count=16"],
                                capture_output=True)
        assert result.returncode != 0, "writing 16 MB into a 4 MB work dir must fail"
        assert work.disk_full()
    finally:
        root = work.root
        work.destroy()
    assert not root.exists()
    assert str(root) not in Path("/proc/self/mounts").read_text()
