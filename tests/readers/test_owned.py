"""catalog.readers.owned: temporary files owned by a lock, and what a dead owner left."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from catalog.readers import owned
from catalog.readers.owned import abandoned, claim, free

pytestmark = pytest.mark.skipif(not owned.LOCKS, reason="flock is POSIX's")


def test_a_claimed_file_is_not_abandoned_until_its_lock_goes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(owned, "SETTLE", 0.0)
    path = tmp_path / "ring"
    fd = claim(path)
    try:
        assert oct(os.stat(path).st_mode & 0o777) == "0o600"
        assert not abandoned(path)  # its owner holds the lock
        other = os.open(path, os.O_RDWR)
        try:
            assert not free(other)
        finally:
            os.close(other)
        with pytest.raises(FileExistsError):
            claim(path)
    finally:
        os.close(fd)
    assert abandoned(path)  # the owner's lock went with its file


def test_young_files_links_and_folders_are_never_abandoned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    young = tmp_path / "young"
    young.write_bytes(b"")
    assert not abandoned(young)  # past SETTLE only: made, perhaps not locked yet
    monkeypatch.setattr(owned, "SETTLE", 0.0)
    assert abandoned(young)
    (tmp_path / "link").symlink_to(young)
    assert not abandoned(tmp_path / "link")
    assert not abandoned(tmp_path)
    assert not abandoned(tmp_path / "absent")
    with pytest.raises(OSError):
        claim(tmp_path / "link")  # never through a link
