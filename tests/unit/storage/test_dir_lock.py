"""The data directory lock: one holder at a time, across descriptors and processes."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from odradek.storage.dir_lock import LOCK_FILE, DataDirLocked, acquire_data_dir_lock

HOLD = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from odradek.storage.dir_lock import acquire_data_dir_lock
    lock = acquire_data_dir_lock(Path(sys.argv[1]))
    print("locked", flush=True)
    sys.stdin.readline()  # hold until the test closes our stdin
    lock.release()
""")

TRY = textwrap.dedent("""
    import sys
    from pathlib import Path
    from odradek.storage.dir_lock import DataDirLocked, acquire_data_dir_lock
    try:
        acquire_data_dir_lock(Path(sys.argv[1])).release()
    except DataDirLocked as exc:
        print("locked-by", exc.pid, exc.path)
    else:
        print("acquired")
""")


def test_second_descriptor_is_refused_and_names_the_holder(tmp_path: Path) -> None:
    lock = acquire_data_dir_lock(tmp_path)
    assert (tmp_path / LOCK_FILE).read_text().strip() == str(os.getpid())
    with pytest.raises(DataDirLocked) as info:
        acquire_data_dir_lock(tmp_path)
    assert info.value.path == tmp_path
    assert info.value.pid == os.getpid()
    assert str(tmp_path) in str(info.value) and str(os.getpid()) in str(info.value)
    lock.release()
    lock.release()  # idempotent
    again = acquire_data_dir_lock(tmp_path)
    again.release()
    assert (tmp_path / LOCK_FILE).exists()  # a normal release keeps the file


def test_context_manager_releases(tmp_path: Path) -> None:
    with acquire_data_dir_lock(tmp_path) as lock:
        assert lock.held
        with pytest.raises(DataDirLocked):
            acquire_data_dir_lock(tmp_path)
    assert not lock.held
    with acquire_data_dir_lock(tmp_path):
        pass


def test_remove_on_release_leaves_nothing(tmp_path: Path) -> None:
    lock = acquire_data_dir_lock(tmp_path)
    lock.release(remove=True)
    assert os.listdir(tmp_path) == []


def test_unreadable_pid_is_none(tmp_path: Path) -> None:
    with acquire_data_dir_lock(tmp_path):
        # a holder that has not written its pid yet (or wrote garbage)
        os.truncate(tmp_path / LOCK_FILE, 0)
        with pytest.raises(DataDirLocked) as info:
            acquire_data_dir_lock(tmp_path)
        assert info.value.pid is None


def test_missing_directory_is_an_os_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        acquire_data_dir_lock(tmp_path / "absent")


def test_another_process_is_refused_until_the_holder_exits(tmp_path: Path) -> None:
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        # another process, and this one, are refused while it holds the lock
        out = subprocess.run([sys.executable, "-c", TRY, str(tmp_path)], capture_output=True,
                             text=True, check=True).stdout.split()
        assert out[:2] == ["locked-by", str(holder.pid)], out
        with pytest.raises(DataDirLocked) as info:
            acquire_data_dir_lock(tmp_path)
        assert info.value.pid == holder.pid
    finally:
        holder.kill()  # a crash, not a release: the kernel drops the lock with the process
        holder.wait()
    out = subprocess.run([sys.executable, "-c", TRY, str(tmp_path)], capture_output=True,
                         text=True, check=True).stdout.split()
    assert out == ["acquired"]


def test_a_removed_lock_file_is_not_shared(tmp_path: Path) -> None:
    # a process that opened the old file before the holder removed it must not lock a
    # file that is no longer at the path while a third process locks the new one
    first = acquire_data_dir_lock(tmp_path)
    stale_fd = os.open(tmp_path / LOCK_FILE, os.O_RDWR)
    first.release(remove=True)
    second = acquire_data_dir_lock(tmp_path)  # creates a new lock file
    try:
        import fcntl

        fcntl.flock(stale_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # the old inode: lockable
        with pytest.raises(DataDirLocked):
            acquire_data_dir_lock(tmp_path)  # but the path's file is held
    finally:
        os.close(stale_fd)
        second.release()
