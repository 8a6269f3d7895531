"""The crash-safe file protocol of a dataset: the writer lock, atomic creation, the journaled commit, recovery.

`DatasetWriter` (writer.py) decides what an episode changes; this module makes the change whole or not at all:

* `EpisodeCommit`: every changed file is written complete in the staging folder and fsynced; a journal naming
  the renames is written atomically (the commit is decided), the files are renamed over their final names
  and the journal is deleted.
* A crash before the journal exists leaves the previous dataset untouched (the staging files are
  garbage, removed at the next open). A crash after it is rolled forward by `recover`, which the next
  `DatasetWriter.open` (or `lerobot-ros dataset validate --repair`) runs. The writer registers the renames in
  the order videos, data, episodes, tasks, stats, info, so LeRobot's loader still serves all earlier episodes
  while they run; but the files disagree then (data rows > info.json's total_frames), so `validate`
  refuses such a state (`pending_renames`), naming the commit to finish, until an open has rolled it forward.
* `create_skeleton` builds the empty dataset of `DatasetWriter.create` beside the root and renames it into
  place (whole or not at all). A root without a committed episode is no dataset (LeRobot cannot load it);
  `create` takes it over (`uncommitted_dataset`), so a recording or conversion killed before its first save
  can simply re-run.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
from pathlib import Path
from typing import IO, Any

from lerobot_dataset.errors import DatasetError, DatasetExistsError
from lerobot_dataset.layout import INFO_PATH, STAGING_DIR, TASKS_PATH, fsync_dir, fsync_file
from lerobot_dataset.meta import write_tasks

JOURNAL_NAME = "commit-journal.json"
LOCK_NAME = "writer.lock"


def acquire_lock(root: Path) -> IO[str]:
    """Take the dataset's writer lock (one writer per root); DatasetError when another writer holds it."""
    staging = root / STAGING_DIR
    try:
        staging.mkdir(parents=True, exist_ok=True)
        lock = (staging / LOCK_NAME).open("w")
    except OSError as err:
        raise DatasetError(f"cannot write to {root}: {err}; the writer needs a writable dataset folder") from None
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        raise DatasetError(f"another DatasetWriter has {root} open; close it first") from None
    return lock


def recover(root: Path) -> int | None:
    """Finish an interrupted commit (roll forward) and drop staging leftovers.

    Returns the episode index whose commit was completed, or None when there was nothing to finish.
    The caller must hold the writer lock (or know that no writer runs).
    """
    staging = root / STAGING_DIR
    journal = staging / JOURNAL_NAME
    finished: int | None = None
    if journal.is_file():
        try:
            plan = json.loads(journal.read_text())
        except ValueError:
            plan = None  # a torn journal means the commit was not decided yet
        if plan is not None:
            for src, dst in plan["renames"]:
                src_path, dst_path = root / src, root / dst
                if src_path.exists():
                    dst_path.parent.mkdir(parents=True, exist_ok=True)
                    os.replace(src_path, dst_path)
                    fsync_dir(dst_path.parent)
            finished = int(plan["episode_index"])
        journal.unlink()
    if staging.is_dir():
        for entry in staging.iterdir():
            if entry.name == LOCK_NAME:
                continue
            if entry.is_dir():
                shutil.rmtree(entry)
            else:
                entry.unlink()
    return finished


_OUR_META_FILES = {"info.json", "tasks.parquet", "contract.json", "stats.json"}
CREATING_PREFIX = ".lerobot_ros_creating-"


def uncommitted_dataset(root: Path) -> bool:
    """True when `root` holds only what a writer leaves before its first commit (safe to take over).

    That is: the writer's staging folder (without a commit journal, which may finish a first commit), meta/
    with at most info.json (no episode), tasks, contract and stats, and data/, videos/, meta/episodes/ without
    files. Anything else in the folder is somebody's data, so the answer is False.
    """
    root = Path(root)
    if not root.is_dir():
        return False
    for entry in root.iterdir():
        if entry.name == STAGING_DIR:
            if (entry / JOURNAL_NAME).exists():
                return False
        elif entry.name in ("data", "videos", "images"):
            if not entry.is_dir() or any(p.is_file() or p.is_symlink() for p in entry.rglob("*")):
                return False
        elif entry.name == "meta":
            if not entry.is_dir():
                return False
            for item in entry.iterdir():
                if item.name == "episodes":
                    if any(p.is_file() for p in item.rglob("*")):
                        return False
                elif item.name not in _OUR_META_FILES and not item.name.endswith(".tmp"):
                    return False
        else:
            return False
    info_path = root / INFO_PATH
    if info_path.exists():
        try:
            info = json.loads(info_path.read_text())
        except (OSError, ValueError):
            return False
        if not isinstance(info, dict) or info.get("total_episodes") != 0:
            return False
    return True


def _take_over(root: Path) -> None:
    """Empty a root that holds an uncommitted dataset (under its writer lock, so no live writer loses it)."""
    lock = acquire_lock(root)
    try:
        recover(root)  # a journal that appeared meanwhile would commit the first episode: then it is no take-over
        if not uncommitted_dataset(root):
            raise DatasetExistsError(f"{root} already exists; use DatasetWriter.open(root) to append to it")
        for entry in root.iterdir():
            if entry.name != STAGING_DIR:
                shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
        for entry in (root / STAGING_DIR).iterdir():
            if entry.name != LOCK_NAME:
                shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
        (root / STAGING_DIR / LOCK_NAME).unlink()
        (root / STAGING_DIR).rmdir()
    finally:
        lock.close()


def create_skeleton(root: Path, info: dict[str, Any], contract: dict[str, Any] | None) -> IO[str]:
    """Write meta/ of an empty dataset so that `root` appears whole or not at all; returns the held lock.

    The skeleton is built in a hidden sibling folder and renamed onto `root` (absent or empty), so a kill
    leaves no half-created root. Where that rename is impossible (a mount point, a read-only parent) it is
    written in place, info.json last; `uncommitted_dataset` recognises either leftover and `create` takes it over.
    """
    if root.exists() and any(root.iterdir()):
        _take_over(root)
    root.parent.mkdir(parents=True, exist_ok=True)
    for stale in root.parent.glob(f".{root.name}{CREATING_PREFIX}*"):  # left by a killed create
        with contextlib.suppress(OSError, DatasetError):
            acquire_lock(stale).close()
            shutil.rmtree(stale)
    building = root.parent / f".{root.name}{CREATING_PREFIX}{os.getpid()}"
    try:
        shutil.rmtree(building, ignore_errors=True)
        building.mkdir()
    except OSError:
        return _write_skeleton(root, info, contract)  # no writable parent: build in place
    lock = _write_skeleton(building, info, contract)
    try:
        os.rename(building, root)  # atomic; root must be absent or an empty folder
    except OSError:
        lock.close()
        shutil.rmtree(building, ignore_errors=True)
        return _write_skeleton(root, info, contract)
    fsync_dir(root.parent)
    return lock


def _write_skeleton(folder: Path, info: dict[str, Any], contract: dict[str, Any] | None) -> IO[str]:
    """meta/ of an empty dataset in `folder`, info.json last; returns the writer lock taken on it."""
    folder.mkdir(parents=True, exist_ok=True)
    lock = acquire_lock(folder)
    try:
        (folder / "meta").mkdir(exist_ok=True)
        if contract is not None:
            _write_atomic_text(folder / "meta" / "contract.json", json.dumps(contract, indent=2, sort_keys=False))
        write_tasks(folder / STAGING_DIR / "tasks.parquet", [])
        fsync_file(folder / STAGING_DIR / "tasks.parquet")
        os.replace(folder / STAGING_DIR / "tasks.parquet", folder / TASKS_PATH)
        _write_atomic_text(folder / INFO_PATH, json.dumps(info, indent=4))
        fsync_dir(folder / "meta")
    except OSError as err:
        lock.close()
        raise DatasetError(f"cannot create the dataset at {folder}: {err}") from err
    return lock


class EpisodeCommit:
    """Files written to the staging folder, then renamed into place through a journal."""

    def __init__(self, root: Path, episode_index: int) -> None:
        self.root = root
        self.episode_index = episode_index
        self.dir = root / STAGING_DIR / "commit"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.renames: list[tuple[Path, Path]] = []

    def temp_for(self, final_rel: str) -> Path:
        """A staging path for the new content of `final_rel`, registered for the commit."""
        tmp = self.dir / f"{len(self.renames):03d}-{Path(final_rel).name}"
        self.renames.append((tmp, self.root / final_rel))
        return tmp

    def apply(self) -> None:
        for tmp, _ in self.renames:
            fsync_file(tmp)
        fsync_dir(self.dir)
        journal = self.root / STAGING_DIR / JOURNAL_NAME
        plan = {
            "episode_index": self.episode_index,
            "renames": [[str(t.relative_to(self.root)), str(f.relative_to(self.root))] for t, f in self.renames],
        }
        tmp_journal = journal.with_suffix(".tmp")
        tmp_journal.write_text(json.dumps(plan))
        fsync_file(tmp_journal)
        os.replace(tmp_journal, journal)
        fsync_dir(journal.parent)
        for tmp, final in self.renames:
            final.parent.mkdir(parents=True, exist_ok=True)
            os.replace(tmp, final)
        for directory in {final.parent for _, final in self.renames}:
            fsync_dir(directory)
        journal.unlink()


def pending_renames(root: Path) -> tuple[int, int]:
    """(files still to move into place, files) of a decided commit; (0, 0) without a (readable) journal.

    Only a half-applied commit (0 < pending < files) leaves files that disagree: before its first rename
    they are still the previous commit's, after its last a leftover journal is harmless, and a torn
    journal was never decided.
    """
    try:
        plan = json.loads((root / STAGING_DIR / JOURNAL_NAME).read_text())
        renames = plan["renames"]
        return sum(1 for src, _ in renames if (root / src).exists()), len(renames)
    except (OSError, ValueError, KeyError, TypeError):
        return 0, 0


def _write_atomic_text(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    fsync_file(tmp)
    os.replace(tmp, path)


__all__ = [
    "CREATING_PREFIX",
    "JOURNAL_NAME",
    "LOCK_NAME",
    "EpisodeCommit",
    "acquire_lock",
    "create_skeleton",
    "pending_renames",
    "recover",
    "uncommitted_dataset",
]
