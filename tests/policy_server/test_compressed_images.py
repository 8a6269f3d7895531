"""Camera images sent as JPEG / PNG: the frames, the bounded decoding (a decompression bomb is refused before a
byte is decoded), and an ACT checkpoint served with compressed images against the same policy in-process."""

from __future__ import annotations

import json
import struct
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fake_policy_server import CAMERA_KEY, SinePolicy, camera_like_image

from lerobot_policy_server import images, protocol
from lerobot_policy_server.client import PolicyClient, RemoteError
from lerobot_policy_server.protocol import EncodedImage, ErrorCode, FeatureSpec, PredictRequest, ProtocolError
from lerobot_policy_server.service import start_server

CAMERA = FeatureSpec(CAMERA_KEY, (240, 320, 3), "uint8", True)


def png_bomb(height: int, width: int) -> bytes:
    """A valid PNG of height x width black RGB pixels: a few kB that decode to height * width * 3 bytes."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    compressor = zlib.compressobj(9)
    row = b"\x00" * (1 + 3 * width)
    body = b"".join(compressor.compress(row) for _ in range(min(height, 64))) + compressor.flush()
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", body) + chunk(b"IEND", b"")


def jpeg_declaring(height: int, width: int) -> bytes:
    """A real 240x320 JPEG whose frame header (SOF0) is rewritten to declare height x width."""
    data = bytearray(images.encode_image(camera_like_image(240, 320), "jpeg", 90))
    at = data.index(b"\xff\xc0") + 2  # SOF0: length(2) precision(1) height(2) width(2)
    data[at + 3 : at + 7] = struct.pack(">HH", height, width)
    return bytes(data)


def test_a_request_with_compressed_images_round_trips_and_a_raw_one_is_the_old_frame() -> None:
    state = np.arange(6, dtype=np.float32)
    jpeg = images.encode_image(camera_like_image(240, 320), "jpeg", 90)
    frame = protocol.encode_predict_request(PredictRequest(5, "t", {"observation.state": state},
                                                           {CAMERA_KEY: EncodedImage("jpeg", jpeg)}))  # fmt: skip
    decoded = protocol.decode_predict_request(frame)
    assert decoded.images == {CAMERA_KEY: EncodedImage("jpeg", jpeg)}
    assert list(decoded.observation) == ["observation.state"]
    raw = protocol.encode_predict_request(PredictRequest(5, "t", {"observation.state": state}))
    header_len = struct.unpack_from("<I", raw, 8)[0]
    assert "images" not in json.loads(raw[12 : 12 + header_len])  # what a server without images reads


def test_an_info_without_image_encodings_means_raw_only() -> None:
    info = SinePolicy(6, 15, 30.0, "none").info
    frame = bytearray(protocol.encode_info(info))
    header_len = struct.unpack_from("<I", frame, 8)[0]
    header = json.loads(frame[12 : 12 + header_len])
    del header["image_encodings"]  # as a server before compressed images answers
    old = json.dumps(header).encode()
    frame = frame[:8] + struct.pack("<I", len(old)) + old
    assert protocol.decode_info(bytes(frame)).image_encodings == ("raw",)


@pytest.mark.parametrize(
    ("header", "words"),
    [
        ({"images": {CAMERA_KEY: "gif"}}, "'gif' is not one of jpeg, png"),
        ({"images": {"observation.nothing": "png"}}, "needs a 1-D uint8 tensor of png bytes, got None"),
        ({"images": [CAMERA_KEY]}, "field 'images' must map"),
    ],
)
def test_bad_image_fields_are_refused_naming_what(header: dict, words: str) -> None:
    frame = protocol._frame(protocol.Kind.PREDICT_REQUEST, {"stamp_ns": 0, "task": "", **header},
                            {CAMERA_KEY: np.zeros(4, np.uint8)})  # fmt: skip
    with pytest.raises(ProtocolError, match=words):
        protocol.decode_predict_request(frame)


@pytest.mark.parametrize("encoding", ["jpeg", "png"])
def test_the_declared_size_is_read_without_decoding(encoding: str) -> None:
    data = images.encode_image(camera_like_image(48, 64), encoding, 90)
    assert images.declared_size(encoding, data) == (48, 64)


@pytest.mark.parametrize(
    ("encoding", "data", "words"),
    [
        ("png", png_bomb(100_000, 100_000), "declares 100000x100000 pixels, the policy needs 320x240; not decoded"),
        ("jpeg", jpeg_declaring(60_000, 60_000), "declares 60000x60000 pixels, the policy needs 320x240; not decoded"),
        ("png", png_bomb(240, 321), "declares 321x240 pixels"),
        ("jpeg", b"\xff\xd8\xff\xda\x00\x02", "no frame header"),
        ("png", b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIDAT", "first chunk is not IHDR"),
        ("png", b"\x89PNG\r\n\x1a\n" + bytes(240 * 320 * 3 + images.SLACK_BYTES), "exceed the raw image's"),
    ],
)
def test_a_decompression_bomb_or_a_wrong_size_is_refused_before_decoding(
    encoding: str, data: bytes, words: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import cv2

    def no_decoding(*args: object) -> None:
        raise AssertionError("cv2.imdecode was called")

    monkeypatch.setattr(cv2, "imdecode", no_decoding)
    with pytest.raises(ProtocolError, match=words) as err:
        images.decode_image(CAMERA, EncodedImage(encoding, data))
    assert err.value.code is ErrorCode.INVALID_ARGUMENT


@pytest.mark.parametrize("encoding", ["jpeg", "png"])
def test_truncated_bytes_are_invalid_argument(encoding: str) -> None:
    data = images.encode_image(camera_like_image(240, 320), encoding, 90)
    with pytest.raises(ProtocolError, match=f"the {encoding} bytes do not decode") as err:
        images.decode_image(CAMERA, EncodedImage(encoding, data[: len(data) // 2]))
    assert err.value.code is ErrorCode.INVALID_ARGUMENT


@pytest.fixture
def camera_server():
    policy = SinePolicy(6, 15, 30.0, "none", camera=(240, 320))
    server, port = start_server(policy, "127.0.0.1", 0)
    yield policy, port
    server.stop(0)


def test_a_bomb_through_the_server_is_invalid_argument_and_it_keeps_serving(camera_server) -> None:
    _, port = camera_server
    bomb = PredictRequest(0, "", {"observation.state": np.zeros(6, np.float32)},
                          {CAMERA_KEY: EncodedImage("png", png_bomb(100_000, 100_000))})  # fmt: skip
    with PolicyClient(f"grpc://127.0.0.1:{port}") as client:
        with pytest.raises(RemoteError, match=r"'observation\.images\.front': the png declares 100000x100000") as err:
            client._call("Predict", protocol.encode_predict_request(bomb), None)
        assert err.value.code is ErrorCode.INVALID_ARGUMENT
        assert client.info().image_encodings == ("raw", "jpeg", "png")


@pytest.mark.parametrize("encoding", ["raw", "jpeg", "png"])
def test_the_server_decodes_what_the_client_compressed(camera_server, encoding: str) -> None:
    policy, port = camera_server
    image = camera_like_image(240, 320)
    observation = {"observation.state": np.zeros(6, np.float32), CAMERA_KEY: image}
    with PolicyClient(f"grpc://127.0.0.1:{port}", image_encoding=encoding, jpeg_quality=90) as client:
        reply, transfer = client.predict_timed(observation, 1)
    seen = image if encoding == "raw" else images.decode_image(CAMERA, EncodedImage(encoding, images.encode_image(
        image, encoding, 90)))  # fmt: skip
    np.testing.assert_array_equal(reply.actions, policy.predict({**observation, CAMERA_KEY: seen}, ""))
    raw_bytes = 240 * 320 * 3
    assert (transfer.request_bytes > raw_bytes) == (encoding == "raw")
    assert transfer.request_bytes < raw_bytes / 10 if encoding == "jpeg" else True


def test_a_bad_encoding_option_names_the_choices() -> None:
    with pytest.raises(ValueError, match="expected one of raw, jpeg, png"):
        PolicyClient("grpc://127.0.0.1:1", image_encoding="webp")
    with pytest.raises(ValueError, match=r"JPEG quality 0: expected 1\.\.100"):
        PolicyClient("grpc://127.0.0.1:1", image_encoding="jpeg", jpeg_quality=0)


@pytest.fixture(scope="module")
def act_backend(tmp_path_factory):
    """A small ACT (random weights, seed 0) reading the state and a 240x320 camera; actions in degrees, std 10."""
    import torch

    from lerobot_policy_server.backends import load_backend
    from lerobot_training.checkpoint import save_policy
    from lerobot_training.features import FeatureType, PolicyFeature
    from lerobot_training.policies.act import ACTConfig, ACTPolicy

    torch.manual_seed(0)
    names = tuple(f"j{i}.pos" for i in range(6))
    inputs = {"observation.state": PolicyFeature(FeatureType.STATE, (6,), names),
              CAMERA_KEY: PolicyFeature(FeatureType.VISUAL, (3, 240, 320))}  # fmt: skip
    config = ACTConfig(
        input_features=inputs, output_features={"action": PolicyFeature(FeatureType.ACTION, (6,), names)},
        chunk_size=10, n_action_steps=10, dim_model=32, n_heads=2, dim_feedforward=64, n_encoder_layers=1,
        n_decoder_layers=1, n_vae_encoder_layers=1, latent_dim=8,
    )  # fmt: skip
    ones = torch.ones(6)
    stats = {
        "observation.state": {"mean": torch.zeros(6), "std": 30 * ones, "min": -90 * ones, "max": 90 * ones},
        "action": {"mean": torch.zeros(6), "std": 10 * ones, "min": -30 * ones, "max": 30 * ones},
        CAMERA_KEY: {"mean": torch.full((3, 1, 1), 0.5), "std": torch.full((3, 1, 1), 0.25),
                     "min": torch.zeros(3, 1, 1), "max": torch.ones(3, 1, 1)},
    }  # fmt: skip
    directory = tmp_path_factory.mktemp("act") / "pretrained_model"
    save_policy(directory, ACTPolicy(config, stats), fps=30)
    return load_backend(str(directory), "lerobot_training")


def test_act_served_with_jpeg_and_png_predicts_the_in_process_chunk(act_backend) -> None:
    """Through the server, JPEG (quality 90) and PNG give exactly the in-process chunk of the decoded image.

    Against the raw image, PNG is exact (lossless) and JPEG is within a tolerance: the chunk may move no more than
    it moves when every pixel is brightened by the JPEG's own mean absolute pixel error (rounded up to whole
    levels), i.e. an exposure change of the size JPEG's error has on average, which a policy run on a real camera
    meets between any two frames. That tolerance is asserted to be well below the chunk change of another scene,
    so it does not accept anything.
    """
    image = camera_like_image(240, 320)
    spec = next(s for s in act_backend.info.inputs if s.key == CAMERA_KEY)
    observation = {"observation.state": np.linspace(-20, 20, 6).astype(np.float32), CAMERA_KEY: image}

    def in_process(picture: np.ndarray) -> np.ndarray:
        return act_backend.predict({**observation, CAMERA_KEY: picture}, "")

    raw_chunk = in_process(image)
    server, port = start_server(act_backend, "127.0.0.1", 0)
    try:
        served = {}
        for encoding in ("jpeg", "png"):
            with PolicyClient(f"grpc://127.0.0.1:{port}", timeout_s=60, image_encoding=encoding) as client:
                served[encoding] = client.predict(observation, 1).actions
    finally:
        server.stop(0)
    decoded = {e: images.decode_image(spec, EncodedImage(e, images.encode_image(image, e, 90))) for e in served}
    for encoding, chunk in served.items():
        np.testing.assert_array_equal(chunk, in_process(decoded[encoding]), err_msg=encoding)
    np.testing.assert_array_equal(decoded["png"], image)
    np.testing.assert_array_equal(served["png"], raw_chunk)
    pixel_error = float(np.abs(decoded["jpeg"].astype(np.int16) - image).mean())
    assert 0 < pixel_error < 4, pixel_error  # quality 90 on a camera-like picture
    brighter = np.clip(image.astype(np.int16) + int(np.ceil(pixel_error)), 0, 255).astype(np.uint8)
    tolerance = float(np.abs(in_process(brighter) - raw_chunk).max())
    other_scene = float(np.abs(in_process(camera_like_image(240, 320, seed=1)) - raw_chunk).max())
    assert tolerance < other_scene / 2, (tolerance, other_scene)
    assert np.abs(served["jpeg"] - raw_chunk).max() <= tolerance
