"""Fuzz targets: the parsers and intake paths of the project, each fed mutated inputs (see fuzz_harness).

* `BagStorage`: mcap and sqlite3 bags (lerobot_bags.synthetic) with bit flips, truncation, byte
  overwrites, MCAP record/chunk corruption (CRC zeroed or kept) and SQL-level row mutations, converted by
  `bag_events` (bag2dataset's per-bag core);
* `BagMetadata`: metadata.yaml with structural (keys dropped, values of the wrong type or range) and textual
  mutations;
* `Contracts`: the shipped SO-101 contract with structural and value mutations, through `Contract.load`;
* `RecorderMessages`: an episode of JointState and Image messages as raw CDR with one or a few mutated values,
  stamps or bytes, through the live recorder's pure path (header stamp, deserialize, contract vector,
  `LiveSampler`, `FrameDecoder`), as `recorder/session.py` feeds it;
* `ExecutorChunks`: a valid chunk, a mutated ActionChunk (stamp, period, names, horizon, data), then a valid
  chunk again, through `chunk_from_rows` and `ChunkExecutor`.

Every input is a pure function of ``(seed, index)``.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import math
import shutil
import sqlite3
import struct
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from fuzz_harness import AcceptedChanged, DataLost

from lerobot_contract.time import NS

REPO = Path(__file__).resolve().parents[2]


def rng_for(seed: int, index: int) -> np.random.Generator:
    return np.random.default_rng([seed, index])


WEIRD_INTS = [0, -1, 1, 2**31 - 1, -(2**31), 2**32 - 1, 2**63 - 1, -(2**63), 10**18, 999_999_999, 1_000_000_000]
WEIRD_FLOATS = [math.nan, math.inf, -math.inf, 0.0, -0.0, 1e308, -1e308, 1e-308, 1e6, -1e6]


def weird_value(rng: np.random.Generator) -> Any:
    """A value of a random kind, often one that breaks assumptions."""
    kind = int(rng.integers(10))
    if kind == 0:
        return WEIRD_INTS[int(rng.integers(len(WEIRD_INTS)))]
    if kind == 1:
        return WEIRD_FLOATS[int(rng.integers(len(WEIRD_FLOATS)))]
    if kind == 2:
        return ["", " ", "\n", "x" * 5000, "é", "../../etc/passwd", "/dev/null", "null", "~", "1e999"][
            int(rng.integers(10))
        ]
    if kind == 3:
        return None
    if kind == 4:
        return bool(rng.integers(2))
    if kind == 5:
        return []
    if kind == 6:
        return {}
    if kind == 7:
        return [weird_value(rng) for _ in range(int(rng.integers(1, 4)))]
    if kind == 8:
        return {"x": weird_value(rng)}
    return int(rng.integers(-1000, 1000))


def _slots(tree: Any) -> list[tuple[Any, Any]]:
    """(container, key) of every value in a parsed YAML tree."""
    out: list[tuple[Any, Any]] = []
    todo = [tree]
    while todo:
        node = todo.pop()
        keys = list(node) if isinstance(node, dict) else range(len(node)) if isinstance(node, list) else []
        for k in keys:
            out.append((node, k))
            todo.append(node[k])
    return out


def mutate_tree(tree: Any, rng: np.random.Generator, edits: int) -> Any:
    """Structural mutations of a parsed YAML tree: drop, replace, duplicate, retype keys and values."""
    tree = copy.deepcopy(tree)
    for _ in range(edits):
        paths = _slots(tree)
        if not paths:
            return weird_value(rng)
        parent, key = paths[int(rng.integers(len(paths)))]
        op = int(rng.integers(8))
        value = parent[key]
        if op == 0:
            del parent[key]
        elif op == 1:
            parent[key] = weird_value(rng)
        elif op == 2 and isinstance(value, bool | int | float) and not isinstance(value, bool):
            parent[key] = type(value)(value * [-1, 0, 2, 1000, 1e9][int(rng.integers(5))])
        elif op == 3 and isinstance(value, str):
            parent[key] = value[: int(rng.integers(len(value) + 1))] + ["", "x", "/", " ", "\x00"][int(rng.integers(5))]
        elif op == 4 and isinstance(parent, dict):
            parent[str(weird_value(rng))[:20] or "k"] = value
        elif op == 5 and isinstance(value, list) and value:
            value.append(copy.deepcopy(value[int(rng.integers(len(value)))]))
        elif op == 6 and isinstance(value, list) and len(value) > 1:
            rng.shuffle(value)
        else:
            parent[key] = str(value) if not isinstance(value, str) else value.upper()
    return tree


def mutate_bytes(data: bytes, rng: np.random.Generator, protect: int = 0) -> tuple[bytes, str]:
    """Generic byte-level mutations (bit flips, truncation, overwrite, zeroing, insertion, deletion)."""
    buf = bytearray(data)
    n = len(buf)
    op = int(rng.integers(6))
    if op == 0:
        flips = int(rng.integers(1, 17))
        for _ in range(flips):
            pos = int(rng.integers(protect, n))
            buf[pos] ^= 1 << int(rng.integers(8))
        return bytes(buf), f"{flips} bit flips"
    if op == 1:
        cut = int(rng.integers(0, n))
        return bytes(buf[:cut]), f"truncated at {cut}/{n}"
    if op == 2:
        pos = int(rng.integers(protect, n))
        size = int(rng.integers(1, 64))
        buf[pos : pos + size] = rng.integers(0, 256, size=len(buf[pos : pos + size]), dtype=np.uint8).tobytes()
        return bytes(buf), f"{size} random bytes at {pos}"
    if op == 3:
        pos = int(rng.integers(protect, n))
        size = int(rng.integers(1, 512))
        buf[pos : pos + size] = bytes(len(buf[pos : pos + size]))
        return bytes(buf), f"{size} zero bytes at {pos}"
    if op == 4:
        pos = int(rng.integers(protect, n))
        size = int(rng.integers(1, 64))
        return bytes(buf[:pos] + rng.integers(0, 256, size=size, dtype=np.uint8).tobytes() + buf[pos:]), (
            f"{size} bytes inserted at {pos}"
        )
    pos = int(rng.integers(protect, n))
    size = int(rng.integers(1, 64))
    del buf[pos : pos + size]
    return bytes(buf), f"{size} bytes deleted at {pos}"


def mcap_records(data: bytes) -> list[tuple[int, int, int]]:
    """(opcode, body offset, body length) of the top-level MCAP records (after the 8-byte magic)."""
    out = []
    pos = 8
    while pos + 9 <= len(data):
        op = data[pos]
        (length,) = struct.unpack_from("<Q", data, pos + 1)
        out.append((op, pos + 9, length))
        pos += 9 + length
        if op == 0x02:  # footer
            break
    return out


def mutate_mcap(data: bytes, rng: np.random.Generator) -> tuple[bytes, str]:
    """Corrupt one MCAP record: its body, its length, or a chunk's payload with the CRC zeroed or kept."""
    records = mcap_records(data)
    buf = bytearray(data)
    op = int(rng.integers(4))
    chunks = [r for r in records if r[0] == 0x06]
    if op == 0 and chunks:
        _, body, length = chunks[int(rng.integers(len(chunks)))]
        crc_at = body + 24
        zero_crc = bool(rng.integers(2))
        if zero_crc:
            buf[crc_at : crc_at + 4] = bytes(4)
        # records area starts after the compression string and its u64 length
        (clen,) = struct.unpack_from("<I", buf, body + 28)
        start = body + 32 + clen + 8
        flips = int(rng.integers(1, 9))
        for _ in range(flips):
            pos = int(rng.integers(start, body + length))
            buf[pos] ^= 1 << int(rng.integers(8))
        return bytes(buf), f"chunk at {body}: {flips} payload bit flips, crc {'zeroed' if zero_crc else 'kept'}"
    opcode, body, length = records[int(rng.integers(len(records)))]
    if op == 1:
        new = int(rng.choice([0, 1, length - 1, length + 1, 2**31, 2**63 - 1, 2**64 - 1]))
        struct.pack_into("<Q", buf, body - 8, new % 2**64)
        return bytes(buf), f"record op {opcode:#x} at {body}: length {length} -> {new}"
    if op == 2:
        buf[body - 9] = int(rng.integers(256))
        return bytes(buf), f"record at {body}: opcode {opcode:#x} -> {buf[body - 9]:#x}"
    if length:
        pos = body + int(rng.integers(length))
        size = min(int(rng.integers(1, 16)), body + length - pos)
        buf[pos : pos + size] = rng.integers(0, 256, size=size, dtype=np.uint8).tobytes()
        return bytes(buf), f"record op {opcode:#x} at {body}: {size} random bytes at {pos}"
    return bytes(buf), "no-op"


SQL_MUTATIONS = [
    "UPDATE messages SET timestamp = X'0102030405' WHERE id = {row}",
    "UPDATE messages SET timestamp = -1 WHERE id = {row}",
    "UPDATE messages SET timestamp = 9223372036854775807 WHERE id = {row}",
    "UPDATE messages SET timestamp = NULL WHERE id = {row}",
    "UPDATE messages SET timestamp = 'text' WHERE id = {row}",
    "UPDATE messages SET timestamp = 1.5 WHERE id = {row}",
    "UPDATE messages SET data = X'' WHERE id = {row}",
    "UPDATE messages SET data = NULL WHERE id = {row}",
    "UPDATE messages SET data = 'text' WHERE id = {row}",
    "UPDATE messages SET data = substr(data, 1, {cut}) WHERE id = {row}",
    "UPDATE messages SET topic_id = 99 WHERE id = {row}",
    "UPDATE messages SET topic_id = NULL WHERE id = {row}",
    "DELETE FROM messages WHERE id = {row}",
    "DELETE FROM messages WHERE id >= {row}",
    "UPDATE topics SET type = 'nonexistent_msgs/msg/Nothing' WHERE id = 1",
    "UPDATE topics SET type = '' WHERE id = 1",
    "UPDATE topics SET name = NULL WHERE id = 1",
    "UPDATE topics SET serialization_format = 'json' WHERE id = 1",
    "UPDATE topics SET offered_qos_profiles = 'garbage: [' WHERE id = 1",
    "DELETE FROM topics WHERE id = 2",
    "DROP TABLE topics",
    "DROP TABLE messages",
    "UPDATE schema SET schema_version = 99",
    "DROP TABLE schema",
    "UPDATE metadata SET metadata = 'x: [' ",
    "DELETE FROM message_definitions",
    "UPDATE message_definitions SET encoded_message_definition = 'int32 x' ",
    "UPDATE message_definitions SET encoding = 'bogus' ",
]


def mutate_db3(src: Path, dst: Path, rng: np.random.Generator) -> str:
    """One SQL-level change to a copy of a rosbag2 sqlite3 file (values of the wrong type, rows gone, ...)."""
    shutil.copyfile(src, dst)
    con = sqlite3.connect(dst)
    # The fuzzer's own write needs no durability: without this its commit fsyncs, and under heavy disk load that
    # wait (not the converter) counted against the per-input watchdog (one unreproducible 10 s "hang" of 10,000).
    con.execute("PRAGMA synchronous = OFF")
    con.execute("PRAGMA journal_mode = MEMORY")
    try:
        rows = con.execute("SELECT count(*) FROM messages").fetchone()[0]
        done = []
        for _ in range(int(rng.integers(1, 4))):
            stmt = SQL_MUTATIONS[int(rng.integers(len(SQL_MUTATIONS)))].format(
                row=int(rng.integers(1, rows + 1)), cut=int(rng.integers(0, 64))
            )
            try:
                con.execute(stmt)
            except sqlite3.Error as err:
                stmt += f" (failed: {err})"
            done.append(stmt)
        con.commit()
    finally:
        con.close()
    return "; ".join(done)


CHANGED_KINDS = {
    "conflicting samples with equal stamps": "samples with equal stamps and other values: the later one kept, warned",
    "the contract expects": "messages of another type than the contract's skipped and counted (a type change)",
    "refused": "damaged messages refused and counted in the warnings; their frames hold the previous sample",
    "metadata.yaml says": "fewer messages in the storage than metadata.yaml lists (rows or records lost), warned",
    "disagree": "metadata.yaml disagrees with the storage, which is read directly, warned",
}
SILENT_CHANGE = "a payload value's bytes changed where no checksum covers them (CDR has none; no chunk CRC)"


def changed_kind(warnings: list[str]) -> str:
    """Why a mutated bag's frames differ from the reference's, from what the conversion warned about."""
    for needle, kind in CHANGED_KINDS.items():
        if any(needle in w for w in warnings):
            return kind
    if warnings:
        return "other change, warned: " + warnings[0].split(":")[0]
    return SILENT_CHANGE


def rmw_joint_state(msg: Any) -> bytes:
    """A rosbags JointState serialized by rclpy, as the rmw hands it to rosbag2 and to raw subscriptions (its CDR
    may end in alignment padding that rosbags' serializer does not write)."""
    from builtin_interfaces.msg import Time
    from rclpy.serialization import serialize_message
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Header

    header = Header(stamp=Time(sec=msg.header.stamp.sec, nanosec=msg.header.stamp.nanosec))
    header.frame_id = msg.header.frame_id
    out = JointState(header=header, name=list(msg.name))
    out.position, out.velocity, out.effort = list(msg.position), list(msg.velocity), list(msg.effort)
    return bytes(serialize_message(out))


class _BagBase:
    """Base bags and their reference conversion."""

    name = "bag"
    check_coverage = False

    def __init__(self) -> None:
        from lerobot_bags.errors import BagError
        from lerobot_contract import ContractError

        self.clear_errors: tuple[type[BaseException], ...] = (BagError, ContractError)
        self.bags: dict[str, Path] = {}
        self.reference: dict[str, list[dict[str, Any]]] = {}
        self.work = Path()
        self.last_extra: dict[str, int] | None = None

    def setup(self, workdir: Path) -> None:
        from lerobot_bags.convert import ConvertOptions
        from lerobot_bags.synthetic import SyntheticBagSpec, contract_for, write_synthetic_bag

        self.work = workdir
        for storage in ("mcap", "sqlite3"):
            spec = SyntheticBagSpec(duration_s=0.4, cameras=("front",), height=8, width=8, storage=storage)
            self.bags[storage] = write_synthetic_bag(workdir / f"base-{storage}", spec)
            self.options = ConvertOptions(contract_for(spec, camera_dtype="image"), task="fuzz")
        for storage, path in self.bags.items():
            frames, error, _ = self.convert(path)
            assert error is None and frames, f"the unmutated {storage} bag does not convert: {error}"
            self.reference[storage] = frames

    def convert(self, path: Path) -> tuple[list[dict[str, Any]], str | None, list[str]]:
        from lerobot_bags.convert import BagEvent, EpisodeEvent, FrameEvent, bag_events

        frames = []
        last: Any = None
        self.coverages: list[float] = []
        for event in bag_events(path, self.options):
            if isinstance(event, FrameEvent):
                frames.append(event.values)
            elif isinstance(event, EpisodeEvent):
                self.coverages.append(float(event.report.get("coverage", 1.0)))
            last = event
        if not isinstance(last, BagEvent):
            raise DataLost(f"the conversion ended without a BagEvent (last event {type(last).__name__})")
        return frames, last.error, list(last.info.get("warnings", []))

    def fresh_case(self, index: int) -> tuple[str, Path, Path]:
        """(storage, its reference bag, a fresh copy of it to mutate): mcap for even inputs, sqlite3 for odd."""
        storage = "mcap" if index % 2 == 0 else "sqlite3"
        base = self.bags[storage]
        case = self.work / "case"
        if case.exists():
            shutil.rmtree(case)
        shutil.copytree(base, case)
        return storage, base, case

    def judge(self, storage: str, path: Path) -> None:
        """Raise BagError for a refused bag, DataLost for one accepted wrongly."""
        from lerobot_bags.errors import BagError

        frames, error, warnings = self.convert(path)
        if error is not None:
            raise BagError(error)
        for i, frame in enumerate(frames):
            for key, value in frame.items():
                if np.issubdtype(value.dtype, np.floating) and not np.all(np.isfinite(value)):
                    raise DataLost(f"frame {i} {key} holds non-finite values and the bag was accepted: {value}")
        reference = self.reference[storage]
        if len(frames) < len(reference) and not warnings:
            raise DataLost(f"{len(frames)} frames instead of {len(reference)}, without a warning")
        # Where messages are replaced, not removed: a message refused at either end of a stream moves the
        # episode's first or last frame (frame 0 must hold real data), at most one frame per end. Fewer frames
        # than that with a coverage of 100 % hides a loss. (A truncated storage ends the episode early: warned.)
        if self.check_coverage and len(frames) < len(reference) - 2 and min(self.coverages, default=0.0) >= 1.0:
            raise DataLost(f"{len(frames)} frames instead of {len(reference)}, and the coverage is reported as 100 %")
        changed_keys = sorted(
            {k for a, b in zip(frames, reference, strict=False) for k in a if not np.array_equal(a[k], b[k])}
        )
        self.last_extra = {"accepted_with_warnings": int(bool(warnings))}
        if len(frames) != len(reference) or changed_keys:
            raise AcceptedChanged(changed_kind(warnings))


class BagStorage(_BagBase):
    """Storage files of mcap and sqlite3 bags, mutated."""

    name = "bag_storage"

    def run(self, seed: int, index: int) -> str:
        rng = rng_for(seed, index)
        storage, base, case = self.fresh_case(index)
        data_file = next(p for p in case.iterdir() if p.suffix in (".mcap", ".db3"))
        if storage == "sqlite3" and rng.integers(2):
            described = mutate_db3(base / data_file.name, data_file, rng)
        elif storage == "mcap" and rng.integers(2):
            data, described = mutate_mcap(data_file.read_bytes(), rng)
            data_file.write_bytes(data)
        else:
            data, described = mutate_bytes(data_file.read_bytes(), rng)
            data_file.write_bytes(data)
        described = f"{storage}: {described}"
        self.judge(storage, case)
        return described


class BagMetadata(_BagBase):
    """metadata.yaml of mcap and sqlite3 bags, mutated (structure and text)."""

    name = "bag_metadata"

    def run(self, seed: int, index: int) -> str:
        rng = rng_for(seed, index)
        storage, _, case = self.fresh_case(index)
        meta = case / "metadata.yaml"
        text = meta.read_text()
        if rng.integers(4) == 0:
            data, described = mutate_bytes(text.encode(), rng)
            meta.write_bytes(data)
        else:
            edits = int(rng.integers(1, 4))
            tree = mutate_tree(yaml.safe_load(text), rng, edits)
            meta.write_text(yaml.safe_dump(tree))
            described = f"{edits} structural edits"
        self.judge(storage, case)
        return f"{storage}: {described}"


class Contracts:
    """The shipped SO-101 contract, mutated, through Contract.load (and its dataset feature specs)."""

    name = "contracts"

    def __init__(self) -> None:
        from lerobot_contract import ContractError
        from lerobot_dataset.errors import FeatureError

        self.clear_errors: tuple[type[BaseException], ...] = (ContractError, FeatureError)
        self.base: dict[str, Any] = {}
        self.text = ""
        self.path = Path()

    def setup(self, workdir: Path) -> None:
        self.text = (REPO / "config" / "contracts" / "so101.yaml").read_text()
        self.base = yaml.safe_load(self.text)
        self.path = workdir / "contract.yaml"

    def run(self, seed: int, index: int) -> str:
        from lerobot_contract import Contract
        from lerobot_dataset import feature_specs

        rng = rng_for(seed, index)
        if rng.integers(5) == 0:
            data, described = mutate_bytes(self.text.encode(), rng)
            self.path.write_bytes(data)
        else:
            edits = int(rng.integers(1, 4))
            self.path.write_text(yaml.safe_dump(mutate_tree(self.base, rng, edits), allow_unicode=True))
            described = f"{edits} structural edits"
        contract = Contract.load(self.path)
        feature_specs(contract)
        contract.to_dict()
        for feat in contract.features.values():
            if feat.max_age_s is not None and not (math.isfinite(feat.max_age_s) and feat.max_age_s > 0):
                raise DataLost(f"{feat.key}: max_age_s {feat.max_age_s} accepted")
        if not (isinstance(contract.fps, int) and 0 < contract.fps <= 1000):
            raise DataLost(f"fps {contract.fps!r} accepted")
        return described


JOINTS = ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper")


class RecorderMessages:
    """An episode of raw JointState/Image messages, some mutated, through the live recorder's pure path."""

    name = "recorder_messages"
    START = 1_700_000_000 * NS
    DURATION_NS = NS // 2

    def __init__(self) -> None:
        from rosbags.serde import SerdeError

        from lerobot_contract import MessageMismatchError
        from lerobot_recorder.recorder.errors import RecorderError

        self.clear_errors: tuple[type[BaseException], ...] = ()
        # What `RecordingSession.on_message` drops (counted, warned); anything else escapes its callback.
        self.ignored = (MessageMismatchError, RecorderError, SerdeError, ValueError, KeyError)
        self.last_extra: dict[str, int] | None = None

    def setup(self, workdir: Path) -> None:
        from lerobot_bags.synthetic import SyntheticBagSpec, contract_for
        from lerobot_recorder.recorder.messages import build_typestore

        spec = SyntheticBagSpec(cameras=("front",), height=8, width=8, commands=False)
        self.contract = contract_for(spec, camera_dtype="image")
        self.store = build_typestore([f.type for f in self.contract.features.values()])
        self.reference = self.episode(None)[0]
        assert self.reference > 10, self.reference

    def messages(self) -> list[tuple[str, int, Any]]:
        """(topic, header stamp, message) of the unmutated episode, in receive order."""
        from lerobot_bags.synthetic import camera_pixels, joint_positions

        ts = self.store
        out = []

        def header(stamp: int, frame: str) -> Any:
            time = ts.types["builtin_interfaces/msg/Time"](sec=stamp // NS, nanosec=stamp % NS)
            return ts.types["std_msgs/msg/Header"](stamp=time, frame_id=frame)

        for i in range(self.DURATION_NS * 100 // NS):
            stamp = self.START + i * NS // 100
            msg = ts.types["sensor_msgs/msg/JointState"](
                header=header(stamp, "base"),
                name=list(JOINTS),
                position=joint_positions(i / 100, 6),
                velocity=np.zeros(6),
                effort=np.zeros(0),
            )
            out.append(("/follower/joint_states", stamp, msg))
        for i in range(self.DURATION_NS * 30 // NS):
            stamp = self.START + i * NS // 30 + 1_000_000
            pixels = camera_pixels(i, 0, 8, 8)
            msg = ts.types["sensor_msgs/msg/Image"](
                header=header(stamp, "cam"),
                height=8,
                width=8,
                encoding="rgb8",
                is_bigendian=0,
                step=24,
                data=pixels.reshape(-1),
            )
            out.append(("/cameras/front/image_raw", stamp, msg))
        out.sort(key=lambda m: m[1])
        return out

    def mutate(self, msg: Any, rng: np.random.Generator) -> tuple[Any, bytes | None, str]:
        """A mutated copy of `msg` (or raw bytes replacing its serialization)."""
        msg = copy.deepcopy(msg)
        op = int(rng.integers(5))
        if op == 0:
            sec = int(rng.choice([2**31 - 1, 0, -1, -(2**31), 1, msg.header.stamp.sec - 1, msg.header.stamp.sec + 1]))
            nsec = int(rng.choice([0, 999_999_999, msg.header.stamp.nanosec, 2**32 - 1, 1_000_000_000]))
            msg.header.stamp.sec, msg.header.stamp.nanosec = sec, nsec
            return msg, None, f"stamp {sec}.{nsec}"
        if op == 1 and hasattr(msg, "position"):
            field = ["position", "velocity", "name"][int(rng.integers(3))]
            if field == "name":
                names = list(msg.name)
                kind = int(rng.integers(4))
                if kind == 0:
                    names.pop(int(rng.integers(len(names))))
                elif kind == 1:
                    names[int(rng.integers(len(names)))] = names[0]
                elif kind == 2:
                    rng.shuffle(names)
                else:
                    names.append("extra")
                msg.name = names
                return msg, None, f"names {names}"
            values = np.array(getattr(msg, field), dtype=np.float64)
            kind = int(rng.integers(3))
            if kind == 0 and values.size:
                values[int(rng.integers(values.size))] = float(rng.choice(WEIRD_FLOATS))
            elif kind == 1:
                values = values[: int(rng.integers(values.size + 1))]
            else:
                values = np.concatenate([values, [1.0]])
            setattr(msg, field, values)
            return msg, None, f"{field} {values.tolist()}"
        if op == 1:
            field = ["height", "width", "step", "encoding", "data", "is_bigendian"][int(rng.integers(6))]
            if field == "encoding":
                value: Any = str(rng.choice(["", "bgr8", "mono8", "16UC1", "rgba8", "yuv422", "bogus", "32FC1"]))
            elif field == "data":
                value = np.array(msg.data[: int(rng.integers(len(msg.data) + 1))], dtype=np.uint8)
            elif field == "is_bigendian":
                value = int(rng.integers(256))
            else:
                value = int(rng.choice([0, 1, 7, 9, 24, 48, 2**31 - 1, 2**32 - 1]))
            setattr(msg, field, value)
            return msg, None, f"image {field}={value if field != 'data' else len(value)}"
        raw = bytes(self.store.serialize_cdr(msg, msg.__msgtype__))
        data, described = mutate_bytes(raw, rng)
        return None, data, f"raw CDR {described}"

    def episode(self, rng: np.random.Generator | None, rmw: bool = False) -> tuple[int, str, dict[str, int], int]:
        """Run one episode; (frames kept, what was mutated, counters, how many messages were mutated). With `rmw`
        the joint states that are not mutated arrive as rclpy serializes them."""
        from rosbags.serde import SerdeError

        from lerobot_bags import cdr
        from lerobot_contract import MessageMismatchError
        from lerobot_contract.align import AlignFeature
        from lerobot_contract.errors import ClockJumpError
        from lerobot_contract.frames import FrameDecoder
        from lerobot_contract.sampler import LiveSampler
        from lerobot_recorder.recorder.messages import header_stamp_ns

        contract = self.contract
        features = [
            AlignFeature(f.key, max_age_ns=None if f.max_age_s is None else round(f.max_age_s * NS))
            for f in contract.features.values()
        ]
        sampler = LiveSampler(features, contract.fps, latency_ns=150_000_000, clock_jump_ns=NS, max_samples=60)
        # The recorder's own decoding (lerobot_bags.cdr: CDR as ROS middlewares write it), as session.py uses it.
        values = FrameDecoder(
            contract, functools.partial(cdr.deserialize_cdr, self.store), deserialize_errors=(SerdeError,)
        )
        by_topic: dict[str, list[Any]] = {}
        for feat in contract.features.values():
            by_topic.setdefault(feat.topic, []).append(feat)
        messages = self.messages()
        mutated: dict[int, tuple[Any, bytes | None, str]] = {}
        if rng is not None:
            for _ in range(int(rng.integers(1, 4))):
                i = int(rng.integers(len(messages)))
                mutated[i] = self.mutate(messages[i][2], rng)
        counters = {"messages_ignored": 0, "bad_frames": 0}
        kept = 0
        sampler.start(self.START)

        def take(frames: list[Any]) -> None:
            nonlocal kept
            for frame in frames:
                try:
                    built = values.build(frame)
                except MessageMismatchError:
                    counters["bad_frames"] += 1
                    continue
                for key, value in built.items():
                    if np.issubdtype(value.dtype, np.floating) and not np.all(np.isfinite(value)):
                        raise DataLost(f"a frame's {key} holds non-finite values: {value.tolist()}")
                kept += 1

        for i, (topic, stamp, msg) in enumerate(messages):
            now = stamp + 3_000_000
            if i in mutated:
                new, raw, _ = mutated[i]
                if raw is None:
                    raw = bytes(self.store.serialize_cdr(new, new.__msgtype__))
            elif rmw and msg.__msgtype__ == "sensor_msgs/msg/JointState":
                raw = rmw_joint_state(msg)
            else:
                raw = bytes(self.store.serialize_cdr(msg, msg.__msgtype__))
            try:
                t = header_stamp_ns(raw)
                payloads = {}
                for feat in by_topic[topic]:
                    if feat.is_image:
                        payloads[feat.key] = raw
                    else:
                        payloads[feat.key] = feat.joint_units().apply(
                            feat.raw_vector(cdr.deserialize_cdr(self.store, raw, feat.type))
                        )
            except self.ignored:
                counters["messages_ignored"] += 1
                continue
            try:
                for key, payload in payloads.items():
                    sampler.push(key, t, payload, now)
                take(sampler.poll(now))
            except ClockJumpError as err:
                raise DataLost(f"one message ended the episode as a clock reset: {err}") from None
        take(sampler.stop(self.START + self.DURATION_NS + 3_000_000))
        described = "; ".join(f"msg {i}: {m[2]}" for i, m in sorted(mutated.items()))
        return kept, described, counters, len(mutated)

    def run(self, seed: int, index: int) -> str:
        rng = rng_for(seed, index)
        # One input in four has its joint states as rclpy serializes them; drawn from a generator of its own so
        # that the mutations of every (seed, index) stay what they were.
        rmw = bool(rng_for(seed + 1_000_003, index).integers(4) == 0)
        kept, described, counters, mutated = self.episode(rng, rmw)
        if rmw:
            described = f"rmw-serialized joint states; {described}"
        self.last_extra = counters
        # Each refused message may cost the frames that would have used it (up to 4: max_age covers a short gap,
        # and the sampler counts those frames as dropped, so they are not lost silently).
        if kept < self.reference - 4 * max(1, mutated):
            raise DataLost(f"{kept} frames kept of {self.reference} after: {described}")
        return described


class ExecutorChunks:
    """A valid chunk, a mutated chunk, a valid chunk: through chunk_from_rows and ChunkExecutor."""

    name = "executor_chunks"
    LIMIT = 3.0
    MAX_VELOCITY = 2.0

    def __init__(self) -> None:
        from lerobot_policy_node.core.errors import ChunkRejected, PolicyConfigError

        self.clear_errors: tuple[type[BaseException], ...] = ()
        self.refused = (ChunkRejected, PolicyConfigError)
        self.last_extra: dict[str, int] | None = None

    def setup(self, workdir: Path) -> None:
        pass

    def chunk(self, rng: np.random.Generator, now: int) -> dict[str, Any]:
        horizon = 20
        t = np.arange(horizon)[:, None] * 0.02 + np.arange(6)[None, :] * 0.1
        return {
            "names": list(JOINTS),
            "data": (0.3 * np.sin(t + rng.uniform(0, 1))).reshape(-1).tolist(),
            "horizon": horizon,
            "sec": (now - 20_000_000) // NS,
            "nanosec": (now - 20_000_000) % NS,
            "period": (0, 20_000_000),
            "chunk_id": 1,
        }

    def mutate(self, msg: dict[str, Any], rng: np.random.Generator) -> str:
        field = str(rng.choice(["stamp", "period", "names", "horizon", "data", "chunk_id"]))
        if field == "stamp":
            msg["sec"] = int(rng.choice([-1, -(2**31), 0, 2**31 - 1, msg["sec"] - 100, msg["sec"] + 100]))
            msg["nanosec"] = int(rng.choice([0, 999_999_999, 2**32 - 1, msg["nanosec"]]))
        elif field == "period":
            msg["period"] = (int(rng.choice([0, -1, 2**31 - 1, -(2**31)])), int(rng.choice([0, 1, 999_999_999])))
        elif field == "names":
            names = list(msg["names"])
            kind = int(rng.integers(4))
            if kind == 0:
                names.pop(int(rng.integers(len(names))))
            elif kind == 1:
                names[int(rng.integers(len(names)))] = names[0]
            elif kind == 2:
                rng.shuffle(names)
            else:
                names = ["a", "b", "c", "d", "e", "f"]
            msg["names"] = names
        elif field == "horizon":
            msg["horizon"] = int(rng.choice([0, 1, 19, 21, 2**32 - 1, 10**6]))
        elif field == "data":
            data = list(msg["data"])
            kind = int(rng.integers(3))
            if kind == 0:
                data[int(rng.integers(len(data)))] = float(rng.choice(WEIRD_FLOATS))
            elif kind == 1:
                data = data[: int(rng.integers(len(data) + 1))]
            else:
                data = [float(rng.choice(WEIRD_FLOATS))] * len(data)
            msg["data"] = data
        else:
            msg["chunk_id"] = int(rng.choice([0, 2**64 - 1]))
        value = msg["sec"] if field == "stamp" else msg.get(field)
        return f"{field}: {str(value)[:80]}"

    def submit(self, executor: Any, msg: dict[str, Any], now: int) -> None:
        from lerobot_policy_node.core.executor import chunk_from_rows

        chunk = chunk_from_rows(
            msg["names"],
            JOINTS,
            np.asarray(msg["data"], dtype=np.float64),
            int(msg["horizon"]),
            msg["sec"] * NS + msg["nanosec"],
            msg["period"][0] * NS + msg["period"][1],
            int(msg["chunk_id"]),
        )
        executor.submit(chunk, now)

    def run(self, seed: int, index: int) -> str:
        from lerobot_policy_node.core.executor import BlendMode, ChunkExecutor, ExecutorConfig

        rng = rng_for(seed, index)
        blend = [BlendMode.REPLACE, BlendMode.CROSSFADE, BlendMode.ENSEMBLE][index % 3]
        config = ExecutorConfig(
            joint_names=JOINTS,
            lower=(-self.LIMIT,) * 6,
            upper=(self.LIMIT,) * 6,
            max_velocity=self.MAX_VELOCITY,
            blend=blend,
        )
        executor = ChunkExecutor(config)
        now = 1_700_000_000 * NS
        executor.reset(np.zeros(6), now)
        previous = executor.target(now)
        step_ns = 10_000_000
        refused = 0

        def tick(count: int) -> None:
            nonlocal now, previous
            for _ in range(count):
                now += step_ns
                out = executor.target(now)
                if out is None or not np.all(np.isfinite(out)):
                    raise DataLost(f"target {out} at tick after {described}")
                if np.any(np.abs(out) > self.LIMIT + 1e-9):
                    raise DataLost(f"target {out.tolist()} outside the joint limits after {described}")
                assert previous is not None
                if np.max(np.abs(out - previous)) > self.MAX_VELOCITY * step_ns / NS + 1e-9:
                    raise DataLost(f"step {np.max(np.abs(out - previous))} above the velocity limit after {described}")
                previous = out
            plan = executor.trajectory(now)
            if plan is not None and not np.all(np.isfinite(plan[1])):
                raise DataLost(f"non-finite trajectory after {described}")

        described = "valid chunk"
        self.submit(executor, self.chunk(rng, now), now)
        tick(5)
        msg = self.chunk(rng, now)
        described = self.mutate(msg, rng)
        try:
            self.submit(executor, msg, now)
        except self.refused:
            refused = 1
        tick(5)
        try:
            self.submit(executor, self.chunk(rng, now), now)
        except self.refused as err:
            raise DataLost(f"a valid chunk was refused after the mutated one ({described}): {err}") from None
        tick(5)
        self.last_extra = {"mutated_chunk_refused": refused}
        return described


class BagSemantics(_BagBase):
    """Well-formed bags whose content is hostile: a topic's type changing mid-bag, duplicated messages, samples
    with equal stamps and different values, damaged and oversized images (decompression bombs), and JointState
    bytes as the rmw serializes them (with CDR alignment padding), each placed at random in an mcap bag."""

    name = "bag_semantics"
    check_coverage = True
    KINDS = ("type_change", "duplicates", "equal_stamps", "damaged_image", "bomb", "rmw_bytes")

    def setup(self, workdir: Path) -> None:
        from rosbags.typesys import Stores, get_typestore

        from lerobot_bags.convert import ConvertOptions
        from lerobot_bags.synthetic import SyntheticBagSpec, _messages, contract_for

        self.work = workdir
        self.ts = get_typestore(Stores.ROS2_HUMBLE)
        spec = SyntheticBagSpec(duration_s=0.6, cameras=("front", "wrist"), compressed=("wrist",), height=16, width=16)
        self.messages = [(recv, topic, msg.__msgtype__, msg) for recv, topic, msg in _messages(spec, self.ts)]
        self.options = ConvertOptions(contract_for(spec, camera_dtype="image"), task="fuzz")
        base = self.write(workdir / "base", [(r, t, ty, self.raw(m, ty)) for r, t, ty, m in self.messages])
        self.bags = {"mcap": base}
        frames, error, _ = self.convert(base)
        assert error is None and frames, f"the unmutated bag does not convert: {error}"
        self.reference = {"mcap": frames}

    def raw(self, msg: Any, msgtype: str) -> bytes:
        return bytes(self.ts.serialize_cdr(msg, msgtype))

    def write(self, path: Path, entries: list[tuple[int, str, str, bytes]]) -> Path:
        from rosbags.rosbag2 import StoragePlugin, Writer

        if path.exists():
            shutil.rmtree(path)
        conns: dict[tuple[str, str], Any] = {}
        with Writer(path, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
            for recv, topic, msgtype, data in entries:
                conn = conns.get((topic, msgtype))
                if conn is None:
                    conn = conns[topic, msgtype] = writer.add_connection(topic, msgtype, typestore=self.ts)
                writer.write(conn, recv, data)
        return path

    def mutate(self, kind: str, rng: np.random.Generator) -> tuple[list[tuple[int, str, str, bytes]], str]:
        from lerobot_bags.synthetic import png_declaring

        ts = self.ts
        entries = [(r, t, ty, self.raw(m, ty)) for r, t, ty, m in self.messages]
        picks = [i for i, e in enumerate(self.messages) if e[1] == "/follower/joint_states"]
        images = [i for i, e in enumerate(self.messages) if e[1].startswith("/cameras/front")]
        jpegs = [i for i, e in enumerate(self.messages) if e[1].startswith("/cameras/wrist")]
        if kind == "type_change":
            topic = str(rng.choice(["/follower/joint_states", "/cameras/front/image_raw"]))
            on_topic = [i for i, e in enumerate(self.messages) if e[1] == topic]
            start = int(rng.integers(1, len(on_topic)))
            other = str(rng.choice(["std_msgs/msg/Float64MultiArray", "sensor_msgs/msg/Image", "std_msgs/msg/String"]))
            if other == self.messages[on_topic[0]][2]:
                other = "std_msgs/msg/Float64MultiArray"
            for i in on_topic[start:]:
                recv, _, _, msg = self.messages[i]
                if other == "std_msgs/msg/Float64MultiArray":
                    new: Any = ts.types[other](
                        layout=ts.types["std_msgs/msg/MultiArrayLayout"](dim=[], data_offset=0),
                        data=np.arange(6, dtype=np.float64),
                    )
                elif other == "std_msgs/msg/String":
                    new = ts.types[other](data="not a joint state")
                else:
                    new = ts.types[other](
                        header=msg.header,
                        height=1,
                        width=1,
                        encoding="rgb8",
                        is_bigendian=0,
                        step=3,
                        data=np.zeros(3, dtype=np.uint8),
                    )
                entries[i] = (recv, topic, other, self.raw(new, other))
            return entries, f"{topic} becomes {other} from message {start} of {len(on_topic)}"
        if kind == "duplicates":
            every = bool(rng.integers(2))
            chosen = set(range(len(entries))) if every else {int(i) for i in rng.choice(len(entries), 5)}
            out = []
            for i, entry in enumerate(entries):
                out.append(entry)
                if i in chosen:
                    out.append((entry[0] + int(rng.integers(0, 1000)), *entry[1:]))
            return out, f"exact duplicates of {'every message' if every else f'{len(chosen)} messages'}"
        if kind == "equal_stamps":
            i = int(rng.choice(picks))
            recv, topic, msgtype, msg = self.messages[i]
            other = copy.deepcopy(msg)
            other.position = np.asarray(msg.position) + float(rng.uniform(0.01, 0.5))
            entries.insert(i + 1, (recv + 1000, topic, msgtype, self.raw(other, msgtype)))
            return entries, f"a second joint state with the stamp of message {i} and other values"
        if kind == "damaged_image":
            which = int(rng.integers(4))
            if which < 3:
                i = int(rng.choice(images))
                recv, topic, msgtype, msg = self.messages[i]
                bad = copy.deepcopy(msg)
                if which == 0:
                    bad.height, bad.width, bad.step, bad.data = 0, 0, 0, np.zeros(0, dtype=np.uint8)
                    what = "0x0 image"
                elif which == 1:
                    bad.step = bad.width  # rgb8 whose step says mono
                    what = "rgb8 with a mono step"
                else:
                    bad.data = bad.data[: len(bad.data) // 2]
                    what = "half the pixel data"
                entries[i] = (recv, topic, msgtype, self.raw(bad, msgtype))
                return entries, f"image {i}: {what}"
            i = int(rng.choice(jpegs))
            recv, topic, msgtype, msg = self.messages[i]
            bad = copy.deepcopy(msg)
            bad.data = rng.integers(0, 256, size=len(msg.data), dtype=np.uint8)
            entries[i] = (recv, topic, msgtype, self.raw(bad, msgtype))
            return entries, f"compressed image {i}: garbage bytes"
        if kind == "bomb":
            i = int(rng.choice(jpegs))
            recv, topic, msgtype, msg = self.messages[i]
            bad = copy.deepcopy(msg)
            side = int(rng.choice([17, 4096, 20000, 65535]))
            bad.format, bad.data = "png", np.frombuffer(png_declaring(side, side), dtype=np.uint8)
            entries[i] = (recv, topic, msgtype, self.raw(bad, msgtype))
            return entries, f"compressed image {i}: a PNG declaring {side}x{side}"
        chosen = picks if rng.integers(2) else [int(i) for i in rng.choice(picks, 5)]
        for i in chosen:
            recv, topic, msgtype, msg = self.messages[i]
            entries[i] = (recv, topic, msgtype, rmw_joint_state(msg))
        return entries, f"{len(chosen)} joint states as rclpy serializes them"

    def run(self, seed: int, index: int) -> str:
        rng = rng_for(seed, index)
        kind = self.KINDS[index % len(self.KINDS)]
        entries, described = self.mutate(kind, rng)
        # A type change is refused by default; every other one is converted with --allow-type-change.
        allow = kind == "type_change" and index // len(self.KINDS) % 2 == 1
        self.options = dataclasses.replace(self.options, allow_type_change=allow)
        if allow:
            described += " (--allow-type-change)"
        case = self.write(self.work / "case", entries)
        if kind not in ("rmw_bytes", "duplicates"):
            self.judge("mcap", case)
            return f"{kind}: {described}"
        # Bytes as ROS serializes them and exact duplicates carry the same data: anything but the reference's
        # frames is data lost (a valid message refused, or a duplicate shifting what frames hold).
        from lerobot_bags.errors import BagError

        try:
            self.judge("mcap", case)
        except (AcceptedChanged, BagError) as err:
            raise DataLost(f"{described}: {type(err).__name__}: {err}") from None
        return f"{kind}: {described}"
