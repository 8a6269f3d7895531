"""bag2dataset on hostile input (issue 18, failure 5): every case that used to end in a traceback, a runaway
conversion or silently changed data now gives one clear line, or refuses the damaged message and counts it."""

from __future__ import annotations

import errno
import json
import os
import shutil
import sqlite3
import struct
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from bag_helpers import convert
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.typesys import Stores, get_typestore

from lerobot_bags.convert import ConvertOptions
from lerobot_bags.errors import BagError, DiskFullError
from lerobot_bags.reader import CORRUPT_ROW
from lerobot_bags.synthetic import SyntheticBagSpec, contract_for, joint_positions
from lerobot_contract import ContractError
from lerobot_contract.time import NS
from lerobot_dataset import DatasetReader
from lerobot_dataset.validate import validate
from lerobot_ros.cli import main as cli_main

MakeBag = Callable[..., Path]
SPEC = SyntheticBagSpec(duration_s=0.5, height=24, width=32)
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


def _contract_file(tmp_path: Path, **changes: Any) -> Path:
    raw = contract_for(SPEC, camera_dtype="video").to_dict()
    raw.update(changes)
    path = tmp_path / "contract.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def _cli(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str]:
    """Run `lerobot-ros bag2dataset ARGS` in this process: (exit code, stdout + stderr)."""
    code = cli_main(["bag2dataset", *map(str, args), "--quiet", "--codec", "h264"])
    out = capsys.readouterr()
    return code, out.out + out.err


def _one_line_error(text: str, *needles: str) -> None:
    assert "Traceback" not in text, text
    errors = [line for line in text.splitlines() if "error:" in line]
    assert len(errors) == 1, text
    for needle in needles:
        assert needle in errors[0], text


@pytest.mark.parametrize("target", ["file", "/dev/null"])
def test_output_that_is_a_file_or_a_device(
    make_bag: MakeBag, tmp_path: Path, capsys: pytest.CaptureFixture[str], target: str
) -> None:
    bag = make_bag("bag", duration_s=0.5)
    output = tmp_path / "afile" if target == "file" else Path(target)
    if target == "file":
        output.write_text("mine")
    code, text = _cli(capsys, bag, "--contract", _contract_file(tmp_path), "--task", "t", "--output", output)
    assert code == 2
    _one_line_error(text, f"--output {output} is", "dataset folder")
    if target == "file":
        assert output.read_text() == "mine"


@pytest.fixture
def mount_tmpfs(tmp_path: Path) -> Iterator[Callable[[str], Path]]:
    """mount_tmpfs(options) -> a fresh tmpfs mount point (root only; always unmounted)."""
    if not IS_ROOT or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root (a read-only or tiny file system is what this test needs)")
    mounted: list[Path] = []

    def mount(options: str) -> Path:
        point = tmp_path / f"mnt{len(mounted)}"
        point.mkdir()
        command = ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(point)]
        run = subprocess.run(command, capture_output=True, check=False)
        if run.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {run.stderr.decode().strip()}")
        mounted.append(point)
        return point

    yield mount
    for point in mounted:
        # A busy mount (a file still open) is detached lazily rather than left behind for later runs to trip on.
        if subprocess.run(["umount", str(point)], capture_output=True, check=False).returncode != 0:
            subprocess.run(["umount", "-l", str(point)], check=True)


def test_output_under_a_read_only_mount(
    make_bag: MakeBag, tmp_path: Path, capsys: pytest.CaptureFixture[str], mount_tmpfs: Callable[[str], Path]
) -> None:
    read_only = mount_tmpfs("size=1m,ro")
    bag = make_bag("bag", duration_s=0.5)
    contract = _contract_file(tmp_path)
    code, text = _cli(capsys, bag, "--contract", contract, "--task", "t", "--output", read_only / "ds")
    assert code == 2
    _one_line_error(text, "read-only file system", "choose a writable location")


def test_output_in_a_folder_without_write_permission(
    make_bag: MakeBag, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if IS_ROOT:
        pytest.skip("root writes through permission bits; the read-only mount test covers the unwritable output")
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    code, text = _cli(
        capsys, make_bag("bag"), "--contract", _contract_file(tmp_path), "--task", "t", "--output", locked / "ds"
    )
    assert code == 2
    _one_line_error(text, "cannot write in", "choose a writable location")


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "-1", "0"])
def test_tolerance_must_be_positive_and_finite(
    make_bag: MakeBag, tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    root = tmp_path / "ds"
    code, text = _cli(
        capsys,
        make_bag("bag"),
        "--contract",
        _contract_file(tmp_path),
        "--task",
        "t",
        "--output",
        root,
        f"--tolerance={value}",
    )
    assert code == 2
    _one_line_error(text, f"--tolerance {float(value)}", "positive, finite")
    assert not root.exists()
    with pytest.raises(ValueError, match="tolerance must be a positive, finite number"):
        ConvertOptions(contract=contract_for(SPEC), tolerance_s=float(value))


def test_contract_sync_tolerance_that_is_not_finite(make_bag: MakeBag, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="tolerance"):
        convert([make_bag("bag")], contract_for(SPEC), tmp_path / "ds", tolerance_s=float("nan"))
    assert not (tmp_path / "ds").exists()


def test_fps_outside_the_stated_range_is_refused_before_reading(
    make_bag: MakeBag, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """fps 1e9 used to run for minutes writing ~700 MB/min of spill."""
    root = tmp_path / "ds"
    contract = _contract_file(tmp_path, fps=1_000_000_000)
    code, text = _cli(capsys, make_bag("bag"), "--contract", contract, "--task", "t", "--output", root)
    assert code == 2
    _one_line_error(text, "fps: must be an integer in 1..1000", "1000000000")
    assert not root.exists()
    raw = contract_for(SPEC).to_dict()
    raw["fps"] = 1001
    with pytest.raises(ContractError, match=r"1\.\.1000"):  # no contract holds it, so no converter sees it
        type(contract_for(SPEC)).from_dict(raw)


def test_missing_bags_bad_split_jobs_and_hub_options(
    make_bag: MakeBag, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    contract = _contract_file(tmp_path)
    bag = make_bag("bag")
    root = tmp_path / "ds"
    cases = [
        ([bag, tmp_path / "nope", "--output", root], "bag(s) not found", "nope"),
        ([bag, "--output", root, "--split", "gap:x"], "--split 'gap:x'", "gap:SECONDS"),
        ([bag, "--output", root, "--split", "gap:nan"], "--split 'gap:nan'", "positive"),
        ([bag, "--output", root, "--split", "marker:task"], "--split 'marker:task'", "marker:/TOPIC"),
        ([bag, "--output", root, "--jobs", "0"], "--jobs 0", "1..256"),
        ([bag, "--output", root, "--push-to-hub", "noslash"], "--push-to-hub 'noslash'", "user_or_org/name"),
        ([bag, "--output", root, "--repo-id", "a/b/c"], "--repo-id 'a/b/c'", "user_or_org/name"),
        ([bag, "--output", root, "--private"], "--private only applies with --push-to-hub", ""),
    ]
    for args, *needles in cases:
        code, text = _cli(capsys, *args, "--contract", contract, "--task", "t")
        assert code == 2, args
        _one_line_error(text, *needles)
        assert not root.exists()


def _two_episode_bags(make_bag: MakeBag) -> list[Path]:
    return [make_bag(f"bag{i}", duration_s=0.5, seed=i, height=24, width=32) for i in range(3)]


def _check_kept(root: Path, episodes: int) -> None:
    """The committed episodes are intact: validate passes and every frame reads."""
    if episodes == 0:
        assert not root.exists()
        return
    assert validate(root) == []
    with DatasetReader(root) as reader:
        assert reader.num_episodes == episodes
        for i in range(len(reader)):
            assert reader[i]["observation.images.front"].shape == (24, 32, 3)


def test_disk_full_injected_at_the_encoder(make_bag: MakeBag, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ENOSPC from a camera worker's spill file (where a full disk showed first): a DiskFullError naming the path
    and the free space, the episodes committed before intact. Runs without root (the ENOSPC is injected)."""
    from lerobot_dataset import stats

    bags = _two_episode_bags(make_bag)
    contract = contract_for(SPEC, camera_dtype="video")
    frames = {"n": 0}
    real_add = stats.CameraHistograms.add

    def add(self: stats.CameraHistograms, frame: Any) -> None:
        frames["n"] += 1
        if frames["n"] > 40:  # 2 cameras x 15 frames per episode: the second episode fails
            raise OSError(errno.ENOSPC, "No space left on device")
        real_add(self, frame)

    monkeypatch.setattr(stats.CameraHistograms, "add", add)
    root = tmp_path / "ds"
    with pytest.raises(DiskFullError) as caught:
        convert(bags, contract, root)
    message = str(caught.value)
    assert message.startswith(f"disk full while writing {root}: ") and "free space needed: " in message
    assert "the 1 episode(s) committed before are intact" in message
    monkeypatch.setattr(stats.CameraHistograms, "add", real_add)
    _check_kept(root, 1)


@pytest.mark.parametrize(("size_kb", "jobs"), [(16, 1), (64, 1), (160, 1), (400, 1), (160, 2), (600, 2)])
def test_disk_full_on_a_small_tmpfs(
    make_bag: MakeBag,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    mount_tmpfs: Callable[[str], Path],
    size_kb: int,
    jobs: int,
) -> None:
    """16-160 KB free used to end in a traceback from stats.close() that masked the clean error; with --jobs the
    disk fills in a worker process."""
    disk = mount_tmpfs(f"size={size_kb}k")
    bags = _two_episode_bags(make_bag)
    root = disk / "ds"
    contract = _contract_file(tmp_path)
    code, text = _cli(
        capsys, *bags, "--contract", contract, "--task", "t", "--output", root, "--jobs", str(jobs), "--exact-jobs"
    )
    kept = text.count("  episode ")
    if code == 0:
        assert kept == 3, text
    else:
        assert code == 2
        _one_line_error(text, f"disk full while writing {root}: ", "free space needed: ")
    _check_kept(root, kept)


def test_a_db3_whose_timestamp_column_comes_back_as_bytes(make_bag: MakeBag, tmp_path: Path) -> None:
    """A damaged sqlite row (a bit flip in the record's type byte) hands the timestamp back as bytes."""
    spec = SyntheticBagSpec(duration_s=0.5, height=24, width=32, storage="sqlite3")
    bag = make_bag("bag", duration_s=0.5, storage="sqlite3")
    db3 = next(bag.glob("*.db3"))
    with sqlite3.connect(db3) as db:
        topic_id = db.execute("SELECT id FROM topics WHERE name = '/follower/joint_states'").fetchone()[0]
        row = db.execute("SELECT id FROM messages WHERE topic_id = ? ORDER BY id LIMIT 1 OFFSET 10", (topic_id,))
        db.execute("UPDATE messages SET timestamp = X'00ff' WHERE id = ?", (row.fetchone()[0],))
    result = convert([bag], contract_for(spec, camera_dtype="image"), tmp_path / "ds")
    assert not result.failed and len(result.episodes) == 1
    assert result.bags[0]["refused_messages"] == {"/follower/joint_states": {CORRUPT_ROW: 1}}
    assert any("refused 1 damaged message(s)" in w for w in result.bags[0]["warnings"])
    assert validate(tmp_path / "ds") == []


def _mutant_bag(path: Path, mutate: dict[int, Callable[[bytearray], bytes]]) -> Path:
    """One joint topic at 100 Hz for 1 s (positions = joint_positions(t)), message k's CDR passed through
    mutate[k] when given. Written by rosbags, so the mcap chunks carry CRC 0: nothing checks the bytes."""
    typestore = get_typestore(Stores.ROS2_HUMBLE)
    types = typestore.types
    base = 1_700_000_000 * NS
    with Writer(path, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        conn = writer.add_connection("/follower/joint_states", "sensor_msgs/msg/JointState", typestore=typestore)
        for k in range(101):
            stamp = base + k * 10_000_000
            header = types["std_msgs/msg/Header"](
                stamp=types["builtin_interfaces/msg/Time"](sec=stamp // NS, nanosec=stamp % NS), frame_id="base"
            )
            msg = types["sensor_msgs/msg/JointState"](
                header=header,
                name=["a", "b"],
                position=joint_positions((stamp - base) / NS, 2),
                velocity=np.zeros(0),
                effort=np.zeros(0),
            )
            raw = bytes(typestore.serialize_cdr(msg, msg.__msgtype__))
            if k in mutate:
                raw = mutate[k](bytearray(raw))
            writer.write(conn, stamp + 1_000_000, raw)
    return path


def _joint_states_contract() -> Any:
    """A contract of the mutant bags' two joints only (/follower/joint_states, identity units, 10 fps)."""
    return type(contract_for(SPEC)).from_dict(
        {
            "robot_type": "two_joints",
            "fps": 10,
            "features": {
                "observation.state": {
                    "topic": "/follower/joint_states",
                    "type": "sensor_msgs/msg/JointState",
                    "joints": ["a", "b"],
                    "units": "identity",
                }
            },
        }
    )


def _set(offset: int, value: bytes) -> Callable[[bytearray], bytes]:
    def apply(raw: bytearray) -> bytes:
        raw[offset : offset + len(value)] = value
        return bytes(raw)

    return apply


def test_damaged_messages_are_refused_and_counted(tmp_path: Path) -> None:
    """Damaged CDR in a bag without checksums: each detectable kind is refused with a counted reason, the
    remaining messages convert unchanged (hold rule: a frame takes the previous sound message)."""
    # JointState CDR: 4 encapsulation, stamp sec@4 nanosec@8, frame_id length@12 "base\\0"@16, name count@24,
    # "a\\0" length@28 data@32, "b\\0" length@36 data@40, position count@44, padding@48, 2 doubles@52,
    # velocity count@68, ... (offsets in the buffer; CDR aligns doubles to 8 from the end of the encapsulation)
    mutate = {
        10: _set(8, (2_000_000_000).to_bytes(4, "little")),  # nanosec >= 1e9: the stamp moved by 2 s
        20: _set(20, b"X"),  # frame_id terminator gone
        30: _set(44, (3).to_bytes(4, "little")),  # position count past the end
        40: _set(44, (1).to_bytes(4, "little")),  # one position for two names (bytes left over)
        # Bytes left over: more than rmw_serialize writes for it (8 more, for its empty velocity and effort).
        50: lambda raw: bytes(raw) + b"\0" * 12,
        60: _set(4, (1_700_000_000 + 10**6).to_bytes(4, "little")),  # header stamp 11 days ahead
        70: lambda raw: bytes(raw[:30]),  # truncated
        80: _set(52, struct.pack("<d", float("nan"))),  # a NaN position
        90: _set(60, struct.pack("<d", float("inf"))),  # an infinite position
    }
    bag = _mutant_bag(tmp_path / "bag", mutate)
    contract = _joint_states_contract()
    result = convert([bag], contract, tmp_path / "ds")
    assert not result.failed, result.failed
    refused = result.bags[0]["refused_messages"]["/follower/joint_states"]
    assert sum(refused.values()) == len(mutate), refused
    assert refused["header stamp nanosec out of range (>= 1e9)"] == 1
    assert refused["header stamp jumps more than 60 s ahead of the receive clock"] == 1
    assert any(reason.startswith("malformed CDR") for reason in refused)
    assert refused["non-finite value(s) in observation.state"] == 2
    with DatasetReader(tmp_path / "ds") as reader:
        assert len(reader) == 11  # 0.0 .. 1.0 s at 10 fps
        for i in range(len(reader)):
            # Frame i at t = i/10 s holds message 10*i, or the one before it when 10*i was refused.
            k = 10 * i - (1 if 10 * i in mutate else 0)
            np.testing.assert_allclose(reader[i]["observation.state"], joint_positions(k / 100, 2), atol=1e-6)


def test_killed_parent_takes_its_workers_along(tmp_path: Path) -> None:
    """A --jobs worker dies with the converting process, also on SIGKILL (it used to convert on for ~9 s).

    The worker here sleeps forever after `die_with`, as a converting worker would run on: without the
    death signal it never exits and the wait below runs into its (hang-guard) timeout."""
    script = tmp_path / "parent.py"
    script.write_text(
        "import multiprocessing, os, sys, time\n"
        f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
        "from bag_helpers import orphan_probe\n"
        "if __name__ == '__main__':\n"
        "    ctx = multiprocessing.get_context('forkserver')\n"
        "    proc = ctx.Process(target=orphan_probe, args=(os.getpid(),), daemon=True)\n"
        "    proc.start()\n"
        "    print(proc.pid, flush=True)\n"
        "    time.sleep(600)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, env=env)
    assert parent.stdout is not None
    worker = int(parent.stdout.readline())
    assert _alive(worker)
    parent.kill()
    parent.wait()
    _wait_gone([worker])


def _alive(pid: int) -> bool:
    """True while `pid` runs (a zombie counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _wait_gone(pids: list[int], timeout_s: float = 60.0) -> None:
    import time

    deadline = time.monotonic() + timeout_s  # a hang guard, not a speed requirement
    while any(map(_alive, pids)):
        assert time.monotonic() < deadline, f"processes {[p for p in pids if _alive(p)]} outlived their parent"
        time.sleep(0.05)


def _session_pids(sid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except (FileNotFoundError, ProcessLookupError):
                continue
            if int(fields[3]) == sid and fields[0] != "Z":
                out.append(int(entry.name))
    return out


def test_cli_killed_mid_conversion_leaves_no_worker(make_bag: MakeBag, tmp_path: Path) -> None:
    """End to end: `bag2dataset --jobs 2` SIGKILLed after its first episode; every process it started ends."""
    bags = [make_bag(f"bag{i}", duration_s=3.0, seed=i, height=96, width=128, noise=3.0) for i in range(4)]
    contract = tmp_path / "c.yaml"
    raw = contract_for(SyntheticBagSpec(height=96, width=128), camera_dtype="video").to_dict()
    contract.write_text(yaml.safe_dump(raw))
    cmd = [sys.executable, "-m", "lerobot_ros.cli", "bag2dataset", *map(str, bags), "--contract", str(contract)]
    cmd += ["--output", str(tmp_path / "ds"), "--task", "t", "--jobs", "2", "--exact-jobs", "--quiet"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("  episode "):
            break
    proc.kill()
    proc.wait()
    # Every process of its session, listed after the kill: a worker may start between a listing taken before the kill
    # and the kill itself (under load one did, and such a listing missed it).
    _wait_gone(_session_pids(proc.pid))
    assert not _session_pids(proc.pid)


def test_report_file_names_refusals_in_json(tmp_path: Path) -> None:
    bag = _mutant_bag(tmp_path / "bag", {5: _set(8, (2_000_000_000).to_bytes(4, "little"))})
    contract = _joint_states_contract()
    convert([bag], contract, tmp_path / "ds")
    report = json.loads((tmp_path / "ds.sync_report.json").read_text())
    assert report["runs"][0]["bags"][0]["refused_messages"] == {
        "/follower/joint_states": {"header stamp nanosec out of range (>= 1e9)": 1}
    }


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (b"rtring encoding", r"/cameras/front/image_raw cannot be decoded: its definition refers to a type"),
        (b"string encodinh", r"its definition of sensor_msgs/msg/Image .* lacks field\(s\) encoding"),
    ],
)
def test_a_damaged_embedded_message_definition(make_bag: MakeBag, tmp_path: Path, damage: bytes, message: str) -> None:
    """A bit flip in the Image definition an mcap embeds (found by flipping single bits of a bag: a KeyError
    from rosbags, or an AttributeError in the image decoder) is a clear error before anything is written."""
    spec = SyntheticBagSpec(duration_s=0.3, height=12, width=16, cameras=("front",))
    bag = make_bag("bag", duration_s=0.3, height=12, width=16, cameras=("front",))
    mcap = next(bag.glob("*.mcap"))
    data = mcap.read_bytes()
    assert data.count(b"string encoding") == 2  # the schema record, and its copy in the summary
    mcap.write_bytes(data.replace(b"string encoding", damage))
    with pytest.raises(BagError, match=message):
        convert([bag], contract_for(spec, camera_dtype="image"), tmp_path / "ds")
    assert not (tmp_path / "ds").exists()
