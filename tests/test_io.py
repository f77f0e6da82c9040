"""leirc.io.write_atomic: the one writer of every command (atomic, and harmless on special files)."""

from __future__ import annotations

import os
import stat

import pytest

from leirc.io import load_npz, save_npz, write_atomic


def test_replaces_content_atomically_and_keeps_the_mode(tmp_path):
    p = tmp_path / "k.leir"
    p.write_text("old")
    os.chmod(p, 0o640)
    write_atomic(str(p), "new text")
    assert p.read_text() == "new text"
    assert stat.S_IMODE(p.stat().st_mode) == 0o640
    assert [f.name for f in tmp_path.iterdir()] == ["k.leir"]  # no temporary left behind


def test_new_file_gets_the_usual_mode(tmp_path):
    p = tmp_path / "fresh.leir"
    old = os.umask(0o022)
    try:
        write_atomic(str(p), b"x")
    finally:
        os.umask(old)
    assert stat.S_IMODE(p.stat().st_mode) == 0o644


def test_a_symlink_survives_and_its_target_is_written(tmp_path):
    target = tmp_path / "real.leir"
    target.write_text("old")
    link = tmp_path / "link.leir"
    link.symlink_to(target)
    write_atomic(str(link), "new")
    assert link.is_symlink() and target.read_text() == "new"


def test_a_character_device_is_written_to_not_replaced():
    if not os.path.exists("/dev/null") or not os.access("/dev/null", os.W_OK):
        pytest.skip("no writable /dev/null")
    write_atomic("/dev/null", "discarded")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_a_failed_write_leaves_the_old_file(tmp_path, monkeypatch):
    p = tmp_path / "k.leir"
    p.write_text("keep me")

    def boom(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        write_atomic(str(p), "lost")
    assert p.read_text() == "keep me"
    assert [f.name for f in tmp_path.iterdir()] == ["k.leir"]


def test_npz_round_trip(tmp_path):
    import numpy as np

    p = tmp_path / "w.npz"
    save_npz(str(p), {"a": np.arange(3, dtype=np.int32), "b": np.ones((2, 2), np.float32)})
    back = load_npz(str(p))
    assert back["a"].dtype == np.int32 and back["a"].tolist() == [0, 1, 2] and back["b"].shape == (2, 2)


def test_owner_and_group_are_kept_when_this_process_may_set_them(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("giving a file to another owner needs root")
    p = tmp_path / "theirs.leir"
    p.write_text("old")
    os.chown(p, 12345, 23456)
    write_atomic(str(p), "new")
    st = p.stat()
    assert (st.st_uid, st.st_gid) == (12345, 23456) and p.read_text() == "new"
