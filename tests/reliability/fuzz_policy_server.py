"""Network fuzz target of the policy server: mutated frames over a real gRPC channel to the real server.

`PolicyServerFrames` starts `lerobot_policy_server.service.start_server` in the worker (loopback, a free port,
a token, the default `ServerLimits`) serving the tests' `SinePolicy` with a camera and a state input, and sends
each input as the client does (generic unary calls on the method paths of `protocol.SERVICE`): a valid Predict
request (camera raw, JPEG or PNG, encoded by `protocol` and `images`) mutated at the byte, prefix, JSON header,
tensor or image level, or with a missing or wrong token, or Info/Reset/Stats with garbage. After every input a
valid request with the right token must still get the reference chunk, and the server's RSS stays bounded.
"""

from __future__ import annotations

import json
import struct
import sys
import zlib
from pathlib import Path
from typing import Any

import numpy as np
from fuzz_harness import AcceptedChanged, DataLost
from fuzz_targets import REPO, mutate_bytes, mutate_tree, rng_for

sys.path.insert(0, str(REPO / "tests" / "policy_server"))

STATE = "observation.state"
TOKEN = "fuzz-token-0123456789abcdef"
CAMERA = (24, 32)
HORIZON, ACTION_DIM = 15, 6
# The server's resident memory may grow by this much over a run (gRPC's and the allocator's pools settle in the
# first inputs); a frame whose memory stays held shows as steady growth beyond it over 10,000 inputs.
RSS_BOUND_KB = 64 * 1024
CLEAR_CODES = ("INVALID_ARGUMENT", "RESOURCE_EXHAUSTED", "UNAUTHENTICATED", "FAILED_PRECONDITION")
CALL_TIMEOUT_S = 8.0


def png_bomb(side: int) -> bytes:
    """A few hundred bytes of PNG whose IHDR declares `side` x `side` pixels (CRC right: decoders would expand it)."""
    from lerobot_bags.synthetic import png_declaring

    data = bytearray(png_declaring(17, 17))
    struct.pack_into(">II", data, 16, side, side)
    struct.pack_into(">I", data, 29, zlib.crc32(bytes(data[12:29])))
    return bytes(data)


class PolicyServerRefused(Exception):
    """The server answered with a clear status: ``CODE: details`` (details one line)."""


def rss_kb() -> int:
    """This process's resident set size (the server runs in it)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def split_frame(frame: bytes) -> tuple[bytes, dict[str, Any], bytes]:
    """(prefix, header, payload) of a protocol frame."""
    header_len = struct.unpack_from("<I", frame, 8)[0]
    return frame[:12], json.loads(frame[12 : 12 + header_len]), frame[12 + header_len :]


def join_frame(prefix: bytes, header: Any, payload: bytes, length_delta: int = 0) -> bytes:
    text = json.dumps(header, separators=(",", ":")).encode()
    return prefix[:8] + struct.pack("<I", max(0, len(text) + length_delta) % 2**32) + text + payload


class PolicyServerFrames:
    """Predict / Info / Reset / Stats frames, mutated, sent to a real policy server over loopback gRPC."""

    name = "policy_server_frames"
    KINDS = ("bytes", "prefix", "header", "tensor", "image", "token", "other_methods")

    def __init__(self) -> None:
        self.clear_errors: tuple[type[BaseException], ...] = (PolicyServerRefused,)
        self.last_extra: dict[str, int] | None = None
        self.server: Any = None
        self.peak_growth_kb = 0

    def setup(self, workdir: Path) -> None:
        import grpc
        from fake_policy_server import SinePolicy, camera_like_image

        from lerobot_policy_server import images, protocol
        from lerobot_policy_server.protocol import PredictRequest
        from lerobot_policy_server.security import ServerSecurity, token_metadata
        from lerobot_policy_server.service import MESSAGE_OPTIONS, start_server

        self.protocol = protocol
        self.grpc = grpc
        policy = SinePolicy(ACTION_DIM, HORIZON, 30.0, "none", camera=CAMERA)
        self.server, port = start_server(policy, "127.0.0.1", 0, ServerSecurity(TOKEN))
        self.channel = grpc.insecure_channel(f"127.0.0.1:{port}", options=MESSAGE_OPTIONS)
        self.calls = {m: self.channel.unary_unary(f"/{protocol.SERVICE}/{m}") for m in protocol.METHODS}
        self.metadata = token_metadata(TOKEN)
        image = camera_like_image(*CAMERA, seed=3)
        state = np.linspace(-0.5, 0.5, ACTION_DIM, dtype=np.float32)
        self.camera_key = next(spec.key for spec in policy.info.inputs if spec.visual)
        self.frames: dict[str, bytes] = {"raw": protocol.encode_predict_request(
            PredictRequest(123, "fuzz", {STATE: state, self.camera_key: image}))}  # fmt: skip
        for encoding in protocol.COMPRESSED:
            arrays, encoded = images.compress_observation({STATE: state, self.camera_key: image}, encoding)
            self.frames[encoding] = protocol.encode_predict_request(PredictRequest(123, "fuzz", arrays, encoded))
        self.images = {enc: protocol.decode_predict_request(self.frames[enc]).images[self.camera_key].data
                       for enc in protocol.COMPRESSED}  # fmt: skip
        self.reference = {enc: self.predict(frame) for enc, frame in self.frames.items()}
        for _ in range(50):  # gRPC's and the allocator's pools settle
            self.check_still_serving("warm-up")
        self.rss_base_kb = rss_kb()

    def call(self, method: str, frame: bytes, metadata: Any = "token") -> bytes:
        """One call; PolicyServerRefused for a clear status, RuntimeError (a crash) for any other failure."""
        grpc = self.grpc
        try:
            reply: bytes = self.calls[method](
                frame, timeout=CALL_TIMEOUT_S, metadata=self.metadata if metadata == "token" else metadata
            )
        except grpc.RpcError as err:
            status: Any = err
            code = status.code().name if status.code() is not None else "None"
            details = status.details() or ""
            if code in CLEAR_CODES and details.strip() and "\n" not in details.strip():
                raise PolicyServerRefused(f"{code}: {details}") from None
            raise RuntimeError(f"{method} answered {code} with details {details!r}") from None
        return reply

    def predict(self, frame: bytes, metadata: Any = "token") -> Any:
        """The decoded reply of a Predict call; DataLost when an accepted call's chunk is wrong."""
        from lerobot_policy_server.protocol import ProtocolError

        data = self.call("Predict", frame, metadata)
        try:
            reply = self.protocol.decode_predict_reply(data)
        except ProtocolError as err:
            raise DataLost(f"the server's reply does not decode: {err}") from None
        if reply.actions.shape != (HORIZON, ACTION_DIM) or not np.all(np.isfinite(reply.actions)):
            values = str(reply.actions.tolist())[:200]
            raise DataLost(f"accepted, answered actions {reply.actions.dtype} {reply.actions.shape}: {values}")
        return reply

    def check_still_serving(self, described: str) -> None:
        try:
            reply = self.predict(self.frames["raw"])
        except (PolicyServerRefused, RuntimeError) as err:
            raise DataLost(f"a valid request failed after {described}: {err}") from None
        if hasattr(self, "reference") and not np.array_equal(reply.actions, self.reference["raw"].actions):
            raise DataLost(f"a valid request got another chunk after {described}")

    def mutate(self, kind: str, frame: bytes, encoding: str, rng: np.random.Generator) -> tuple[str, bytes, Any, str]:
        """(method, frame, metadata, description) of one mutated call."""
        prefix, header, payload = split_frame(frame)
        if kind == "bytes":
            data, described = mutate_bytes(frame, rng)
            return "Predict", data, "token", described
        if kind == "prefix":
            field = int(rng.integers(4))
            buf = bytearray(frame)
            if field == 0:
                buf[0:4] = bytes(rng.integers(0, 256, 4, dtype=np.uint8))
            elif field == 1:
                struct.pack_into("<H", buf, 4, int(rng.choice([0, 2, 99, 65535])))
            elif field == 2:
                struct.pack_into("<H", buf, 6, int(rng.choice([0, 1, 2, 4, 9, 65535])))
            else:
                struct.pack_into("<I", buf, 8, int(rng.choice([0, 1, len(frame), 2**31, 2**32 - 1, 4 * 2**20 + 1])))
            return "Predict", bytes(buf), "token", f"prefix field {field}: {bytes(buf[:12]).hex()}"
        if kind == "header":
            edits = int(rng.integers(1, 4))
            tree = mutate_tree(header, rng, edits)
            delta = int(rng.choice([0, 0, 0, -1, 1, 7]))
            try:
                data = join_frame(prefix, tree, payload, delta)
            except ValueError:  # a value JSON cannot hold (a NaN with allow_nan off is not raised: json writes NaN)
                data = frame
            return "Predict", data, "token", f"{edits} header edits, length {delta:+d}: {json.dumps(tree)[:200]}"
        if kind == "tensor":
            entry = header["tensors"][int(rng.integers(len(header["tensors"])))]
            field = str(rng.choice(["dtype", "shape", "nbytes", "offset", "name", "dims", "values"]))
            if field == "values":
                state = next(t for t in header["tensors"] if t["name"] == STATE)
                values = np.frombuffer(payload, np.float32, ACTION_DIM, state["offset"]).copy()
                values[int(rng.integers(ACTION_DIM))] = float(rng.choice([np.nan, np.inf, -np.inf, 3e38, -0.0]))
                start = state["offset"]
                payload = payload[:start] + values.tobytes() + payload[start + values.nbytes :]
                return "Predict", join_frame(prefix, header, payload), "token", f"state values {values.tolist()}"
            if field == "dtype":
                entry["dtype"] = str(rng.choice(["uint8", "int32", "int64", "float16", "float32", "float64", "bool",
                                                 "object", "<f4", "V8", "complex64"]))  # fmt: skip
            elif field == "shape":
                entry["shape"] = [int(rng.choice([0, 1, 2, 3, 6, 24, 32, 2**31, 2**40])) for _ in range(
                    int(rng.integers(0, 10)))]  # fmt: skip
            elif field == "dims":
                entry["shape"] = [int(n) for n in rng.permutation(entry["shape"])] + [1] * int(rng.integers(2))
            elif field in ("nbytes", "offset"):
                entry[field] = int(rng.choice([0, 1, -1, entry[field] + 1, entry[field] - 1, 2**63 - 1, 2**64]))
            else:
                entry["name"] = str(rng.choice([STATE, self.camera_key, "", "observation.other"]))
            return "Predict", join_frame(prefix, header, payload), "token", f"tensor {entry['name']}: {field} {entry}"
        if kind == "image":
            return self.mutate_image(prefix, header, payload, encoding, rng)
        if kind == "token":
            which = int(rng.integers(6))
            metadata: Any = [
                None,
                (("authorization", "Bearer wrong-token"),),
                (("authorization", "Bearer "),),
                (("authorization", TOKEN),),  # without "Bearer ": taken as the token itself
                (("authorization", "Bearer " + TOKEN.upper()),),
                (("authorization", "Bearer " + TOKEN[:-1]),),
            ][which]
            method = str(rng.choice(self.protocol.METHODS))
            data = frame if method == "Predict" else self.plain_request(method)
            return method, data, metadata, f"{method} with token case {which}"
        method = str(rng.choice(["Info", "Reset", "Stats"]))
        base = self.plain_request(method)
        op = int(rng.integers(3))
        if op == 0:
            data, described = mutate_bytes(base + bytes(rng.integers(0, 256, 16, dtype=np.uint8)), rng)
        elif op == 1:
            data, described = frame, "a Predict frame"
        else:
            _, request_header, _ = split_frame(base)
            data = join_frame(base[:12], mutate_tree(request_header, rng, 2), bytes(int(rng.integers(0, 64))))
            described = "header edits"
        return method, data, "token", f"{method}: {described}"

    def plain_request(self, method: str) -> bytes:
        encode = {"Info": self.protocol.encode_info_request, "Reset": self.protocol.encode_reset_request,
                  "Stats": self.protocol.encode_stats_request, "Predict": lambda: self.frames["raw"]}  # fmt: skip
        data: bytes = encode[method]()
        return data

    def mutate_image(
        self, prefix: bytes, header: dict[str, Any], payload: bytes, encoding: str, rng: np.random.Generator
    ) -> tuple[str, bytes, Any, str]:
        """An image whose encoding, declared size or bytes lie; replaces the camera tensor (kept last in payload)."""
        from lerobot_bags.synthetic import png_declaring

        height, width = CAMERA
        op = int(rng.integers(7))
        label = str(rng.choice(["jpeg", "png"]))
        if op == 0:
            side = int(rng.choice([1, 17, 4096, 65535, 2**31 - 1]))
            data, described = png_bomb(side), f"PNG bomb declaring {side}x{side}"
            label = "png"
        elif op == 1:
            data, described = png_declaring(height, width), "PNG of the right size whose data holds 16 rows"
            label = "png"
        elif op == 2:
            source = self.images[label]
            data, described = source[: int(rng.integers(len(source)))], f"{label} truncated"
        elif op == 3:
            other = "png" if label == "jpeg" else "jpeg"
            data, described = self.images[other], f"{other} bytes labelled {label}"
        elif op == 4:
            source = bytearray(self.images[label])
            data, described = mutate_bytes(bytes(source), rng, protect=min(len(source) - 1, 32))
            described = f"{label} {described}"
        elif op == 5:
            source = bytearray(self.images["png"])
            struct.pack_into(">II", source, 16, int(rng.choice([width, width * 2, 0])), int(rng.choice([height, 1, 0])))
            data, described, label = bytes(source), "PNG IHDR size lie (CRC kept)", "png"
        else:
            data = bytes(rng.integers(0, 256, int(rng.choice([0, 10, height * width * 3 + 70_000])), dtype=np.uint8))
            described = f"{len(data)} random bytes as {label}"
        state = next(t for t in header["tensors"] if t["name"] == STATE)
        state_bytes = payload[state["offset"] : state["offset"] + state["nbytes"]]
        state["offset"] = 0
        tensors = [state, {"name": self.camera_key, "dtype": "uint8", "shape": [len(data)], "offset": len(state_bytes),
                           "nbytes": len(data)}]  # fmt: skip
        header = {**header, "tensors": tensors, "images": {self.camera_key: label}}
        return "Predict", join_frame(prefix, header, state_bytes + data), "token", described

    def run(self, seed: int, index: int) -> str:
        rng = rng_for(seed, index)
        kind = self.KINDS[index % len(self.KINDS)]
        encoding = str(rng.choice(["raw", "jpeg", "png"]))
        if kind == "image" and encoding == "raw":
            encoding = "jpeg"
        method, frame, metadata, described = self.mutate(kind, self.frames[encoding], encoding, rng)
        described = f"{kind} ({encoding}): {described}"
        outcome: BaseException | None = None
        reply: Any = None
        try:
            if method == "Predict":
                reply = self.predict(frame, metadata)
            else:
                self.call(method, frame, metadata)
        except (PolicyServerRefused, DataLost, RuntimeError) as err:
            outcome = err
        self.last_extra = {}
        if isinstance(outcome, PolicyServerRefused):
            self.last_extra[f"refused_{str(outcome).partition(':')[0]}"] = 1
        self.check_still_serving(described)
        self.check_memory(described)
        if outcome is not None:
            raise outcome
        if kind == "token" and metadata != (("authorization", TOKEN),):
            raise DataLost(f"a call without the server's token was served: {described}")
        if reply is not None:
            reference = self.reference[encoding]
            if (reply.stamp_ns, reply.task) != (reference.stamp_ns, reference.task):
                raise AcceptedChanged("a header field's value changed: the reply echoes the stamp and task as sent")
            if not np.array_equal(reply.actions, reference.actions):
                raise AcceptedChanged("an observation's bytes changed: the frame carries no checksum (TCP's does)")
        return described

    def check_memory(self, described: str) -> None:
        growth = rss_kb() - self.rss_base_kb
        if growth > self.peak_growth_kb:
            # Counts add up over inputs: each input adds what the peak grew by, so the sum is the run's peak.
            self.last_extra = {**(self.last_extra or {}), "server_rss_peak_growth_kb": growth - self.peak_growth_kb}
            self.peak_growth_kb = growth
        if growth > RSS_BOUND_KB:
            raise DataLost(f"the server's RSS grew by {growth} kB (bound {RSS_BOUND_KB} kB) by {described}")
