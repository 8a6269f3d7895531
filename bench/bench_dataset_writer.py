"""Dataset writer throughput for live recording: 3 cameras 640x480 + joint vectors.

Writes bench/results/dataset_writer.json with, per codec (libsvtav1, h264):
* sustained frames/s: add_frame as fast as the writer accepts, plus save_episode (the encoders are
  the bottleneck; add_frame blocks when a camera's queue is full);
* paced at the dataset fps (a live recording): encode lag (frames waiting in the encoder queues,
  and the time save_episode still needs after the last frame) and add_frame latency;
* baseline in the same run: LeRobot's non-streaming path, PNG files (compress level 1) then a batch
  encode per camera with the same codec settings;
* encoder/decoder backends: PyAV (in this venv) against torchcodec 0.13.0 (run in the LeRobot
  reference venv when it exists), one camera, same frames.

Usage: python bench/bench_dataset_writer.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import cv2
import numpy as np
from headline import figure

from lerobot_dataset import DatasetWriter, FeatureSpec
from lerobot_dataset.video import EpisodeVideoEncoder, VideoDecoder

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
CAMERAS = ("front", "wrist", "top")
HEIGHT, WIDTH, FPS = 480, 640, 30


def camera_pool(seed: int, count: int = 30) -> list[np.ndarray]:
    """Frames that look like a scene: smooth shading, moving objects, sensor noise."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:HEIGHT, 0:WIDTH].astype(np.float32)
    base = np.stack([x / WIDTH * 180 + 40, y / HEIGHT * 160 + 50, (x + y) / (WIDTH + HEIGHT) * 120 + 60], axis=-1)
    frames = []
    for i in range(count):
        frame = base.copy()
        cx, cy = 100 + 12 * i + 30 * seed, 120 + 5 * i
        frame[cy : cy + 80, cx : cx + 60] = (200, 60 + 3 * i, 40)
        cv2.circle(frame, (400 - 6 * i, 300), 40, (30, 180, 220), -1)
        frame += rng.normal(0, 3, frame.shape).astype(np.float32)
        frames.append(np.clip(frame, 0, 255).astype(np.uint8))
    return frames


def features() -> dict[str, FeatureSpec]:
    spec: dict[str, FeatureSpec] = {
        "observation.state": FeatureSpec("float32", (6,)),
        "action": FeatureSpec("float32", (6,)),
    }
    for name in CAMERAS:
        spec[f"observation.images.{name}"] = FeatureSpec("video", (HEIGHT, WIDTH, 3))
    return spec


def frame_at(pools: dict[str, list[np.ndarray]], step: int) -> dict[str, object]:
    frame: dict[str, object] = {
        "observation.state": np.full(6, step, dtype=np.float32),
        "action": np.full(6, -step, dtype=np.float32),
    }
    for name, pool in pools.items():
        frame[f"observation.images.{name}"] = pool[step % len(pool)]
    return frame


def run_writer(
    work: Path, codec: str, pools: dict[str, list[np.ndarray]], frames: int, paced: bool
) -> dict[str, object]:
    root = work / f"ds-{codec}-{'paced' if paced else 'sustained'}"
    shutil.rmtree(root, ignore_errors=True)
    writer = DatasetWriter.create(root, repo_id="bench/writer", fps=FPS, features=features(), video_codec=codec)
    writer.start_episode("bench")
    latencies, lags = [], []
    start = time.perf_counter()
    for step in range(frames):
        if paced:
            delay = start + step / FPS - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
        t0 = time.perf_counter()
        writer.add_frame(frame_at(pools, step))
        latencies.append(time.perf_counter() - t0)
        lags.append(writer.encode_lag_frames)
    added = time.perf_counter()
    writer.save_episode()
    done = time.perf_counter()
    writer.close()
    size = sum(p.stat().st_size for p in (root / "videos").rglob("*.mp4"))
    shutil.rmtree(root, ignore_errors=True)
    result: dict[str, object] = {
        "frames": frames,
        "frames_per_s": {"value": frames / (done - start), "unit": "frames/s (3 cameras each)"},
        "save_episode_s": {"value": done - added, "unit": "s"},
        "add_frame_latency_ms": {
            "p50": float(np.percentile(latencies, 50) * 1e3),
            "p99": float(np.percentile(latencies, 99) * 1e3),
            "max": float(np.max(latencies) * 1e3),
        },
        "encode_lag_frames_max": int(np.max(lags)),
        "encode_lag_s_max": float(np.max(lags) / FPS),
        "video_bytes_per_frame": size / frames / len(CAMERAS),
    }
    if not paced:  # paced runs are held to real time by construction
        result["x_real_time"] = {"value": frames / (done - start) / FPS, "unit": "x"}
    return result


def run_png_baseline(work: Path, codec: str, pools: dict[str, list[np.ndarray]], frames: int) -> dict[str, object]:
    """LeRobot's non-streaming path: every frame written as PNG, then one batch encode per camera."""
    images = work / "png-baseline"
    shutil.rmtree(images, ignore_errors=True)
    start = time.perf_counter()
    for name in CAMERAS:
        (images / name).mkdir(parents=True)
    for step in range(frames):
        for name, pool in pools.items():
            bgr = cv2.cvtColor(pool[step % len(pool)], cv2.COLOR_RGB2BGR)
            cv2.imwrite(str(images / name / f"frame-{step:06d}.png"), bgr, [cv2.IMWRITE_PNG_COMPRESSION, 1])
    written = time.perf_counter()
    for name in CAMERAS:
        encoder = EpisodeVideoEncoder(images / f"{name}.mp4", codec=codec, fps=FPS, height=HEIGHT, width=WIDTH)
        for step in range(frames):
            frame = cv2.imread(str(images / name / f"frame-{step:06d}.png"), cv2.IMREAD_COLOR)
            encoder.encode(np.ascontiguousarray(cv2.cvtColor(frame, cv2.COLOR_BGR2RGB)))
        encoder.finish()
    done = time.perf_counter()
    shutil.rmtree(images, ignore_errors=True)
    return {
        "frames_per_s": {"value": frames / (done - start), "unit": "frames/s (3 cameras each)"},
        "png_write_s": written - start,
        "batch_encode_s": done - written,
    }


def pyav_backend(work: Path, pool: list[np.ndarray], frames: int) -> dict[str, object]:
    """One camera through PyAV: encode fps per codec, and random-access decode fps."""
    out: dict[str, object] = {}
    for codec in ("libsvtav1", "h264"):
        path = work / f"pyav-{codec}.mp4"
        t0 = time.perf_counter()
        encoder = EpisodeVideoEncoder(path, codec=codec, fps=FPS, height=HEIGHT, width=WIDTH)
        for step in range(frames):
            encoder.encode(pool[step % len(pool)])
        encoder.finish()
        encode_fps = frames / (time.perf_counter() - t0)
        decoder = VideoDecoder()
        order = np.random.default_rng(0).permutation(frames)[: min(frames, 60)]
        t0 = time.perf_counter()
        for i in order:
            decoder.frame_at(path, float(i) / FPS)
        random_fps = len(order) / (time.perf_counter() - t0)
        t0 = time.perf_counter()
        for i in range(frames):
            decoder.frame_at(path, i / FPS)
        sequential_fps = frames / (time.perf_counter() - t0)
        decoder.close()
        out[codec] = {
            "encode_fps": {"value": encode_fps, "unit": "frames/s"},
            "decode_random_fps": {"value": random_fps, "unit": "frames/s"},
            "decode_sequential_fps": {"value": sequential_fps, "unit": "frames/s"},
        }
    return out


def append_cost(work: Path) -> dict[str, object]:
    """What the atomic commit costs at LeRobot's file-size limits: rewriting the current mp4 (stream copy)
    and data parquet (row-group copy) with one more episode appended."""
    from lerobot_dataset.video import concatenate
    from lerobot_dataset.writer import _write_parquet_appended

    rng = np.random.default_rng(0)
    episode = work / "noisy-episode.mp4"
    encoder = EpisodeVideoEncoder(episode, codec="h264", fps=FPS, height=HEIGHT, width=WIDTH)
    for _ in range(30):
        encoder.encode(rng.integers(0, 256, (HEIGHT, WIDTH, 3), dtype=np.uint8))
    encoder.finish()
    episode_mb = episode.stat().st_size / 2**20
    result: dict[str, object] = {"episode_mp4_mb": episode_mb}
    for target_mb in (50, 200):
        big = work / f"big-{target_mb}.mp4"
        concatenate([episode] * max(1, round(target_mb / episode_mb)), big)
        t0 = time.perf_counter()
        concatenate([big, episode], work / "appended.mp4")
        result[f"mp4_append_at_{target_mb}mb_s"] = {"value": time.perf_counter() - t0, "unit": "s"}
    import pyarrow as pa

    blobs = [rng.integers(0, 256, 300_000, dtype=np.uint8).tobytes() for _ in range(330)]  # ~PNG 640x480
    rows = pa.table({"image": pa.array(blobs, pa.binary()), "index": np.arange(330)})
    data = work / "data-100mb.parquet"
    _write_parquet_appended(None, rows, data)  # as the writer writes it
    new_rows = rows.slice(0, 30)
    t0 = time.perf_counter()
    _write_parquet_appended(data, new_rows, work / "data-appended.parquet")
    result["parquet_append_at_100mb_s"] = {"value": time.perf_counter() - t0, "unit": "s"}
    result["parquet_file_mb"] = data.stat().st_size / 2**20
    return result


TORCHCODEC_PROBE = r"""
import json, sys, time
import numpy as np, torch
from torchcodec.encoders import VideoEncoder
from torchcodec.decoders import VideoDecoder
frames_path, work, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
pool = np.load(frames_path)
batch = torch.from_numpy(np.stack([pool[i % len(pool)] for i in range(n)])).permute(0, 3, 1, 2).contiguous()
out = {}
for codec, opts in (("libsvtav1", {"g": "2", "preset": "12"}), ("libx264", {"g": "2"})):
    path = f"{work}/torchcodec-{codec}.mp4"
    t0 = time.perf_counter()
    try:
        VideoEncoder(batch, frame_rate=30).to_file(
            path, codec=codec, pixel_format="yuv420p", crf=30, extra_options=opts
        )
    except Exception as err:  # noqa: BLE001 - reported in the JSON
        out[codec] = {"error": str(err)[:200]}
        continue
    encode_fps = n / (time.perf_counter() - t0)
    decoder = VideoDecoder(path, seek_mode="approximate")
    order = np.random.default_rng(0).permutation(n)[: min(n, 60)]
    t0 = time.perf_counter()
    for i in order:
        decoder.get_frames_played_at([float(i) / 30])
    random_fps = len(order) / (time.perf_counter() - t0)
    t0 = time.perf_counter()
    for i in range(n):
        decoder.get_frames_played_at([i / 30])
    sequential_fps = n / (time.perf_counter() - t0)
    out[codec] = {"encode_fps": {"value": encode_fps, "unit": "frames/s (batch, not streaming)"},
                  "decode_random_fps": {"value": random_fps, "unit": "frames/s"},
                  "decode_sequential_fps": {"value": sequential_fps, "unit": "frames/s"}}
print(json.dumps(out))
"""


def torchcodec_backend(work: Path, pool: list[np.ndarray], frames: int) -> dict[str, object]:
    python = ROOT / ".venv-lerobot-ref" / "bin" / "python"
    if not python.exists():
        return {"skipped": "no .venv-lerobot-ref (scripts/setup.sh --with-lerobot-reference)"}
    np.save(work / "pool.npy", np.stack(pool))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LD_LIBRARY_PATH")}
    result = subprocess.run(
        [str(python), "-c", TORCHCODEC_PROBE, str(work / "pool.npy"), str(work), str(frames)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if result.returncode != 0:
        return {"error": result.stderr[-500:]}
    data: dict[str, object] = json.loads(result.stdout.strip().splitlines()[-1])
    return data


def value_of(data: object, *keys: str) -> float | None:
    """The `value` of the figure at data[k1][k2]..., or None where that run was skipped or failed."""
    for key in keys:
        if not isinstance(data, dict) or key not in data:
            return None
        data = data[key]
    value = data.get("value") if isinstance(data, dict) else None
    return float(value) if isinstance(value, (int, float)) else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer frames (a smoke run)")
    args = parser.parse_args()
    sustained_frames = 60 if args.quick else 300
    paced_frames = 60 if args.quick else 240
    pools = {name: camera_pool(i) for i, name in enumerate(CAMERAS)}
    report: dict[str, object] = {
        "setup": {
            "cameras": len(CAMERAS),
            "resolution": f"{WIDTH}x{HEIGHT}",
            "fps": FPS,
            "cpu_count": os.cpu_count(),
            "sustained_frames": sustained_frames,
            "paced_frames": paced_frames,
        }
    }
    with tempfile.TemporaryDirectory(prefix="bench-writer-") as tmp:
        work = Path(tmp)
        runs = {}
        for codec in ("libsvtav1", "h264"):
            runs[codec] = (
                run_writer(work, codec, pools, sustained_frames, paced=False),
                run_writer(work, codec, pools, paced_frames, paced=True),
            )
        # ru_maxrss only grows: read it before the baseline and the backend probes run.
        report["writer_peak_rss_mb"] = {
            "value": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "unit": "MiB (process, both codecs, frame pools included)",
        }
        headline = []
        for codec, (sustained, paced) in runs.items():
            baseline = run_png_baseline(work, codec, pools, sustained_frames)
            report[codec] = {"sustained": sustained, "paced": paced, "png_then_batch_baseline": baseline}
            headline += [
                figure(
                    f"sustained throughput, {codec}",
                    value_of(sustained["frames_per_s"]),
                    "frames/s (3 cameras each)",
                    baseline=value_of(baseline["frames_per_s"]),
                    baseline_what="PNG files then a batch encode per camera (LeRobot's non-streaming path), same run",
                    target=f">= {FPS} frames/s (real time: live recording at the dataset fps)",
                ),
                figure(f"encode lag paced at {FPS} fps, max, {codec}", paced["encode_lag_s_max"], "s"),  # type: ignore[arg-type]
            ]
            print(
                f"{codec}: sustained {headline[-2]['value']:.1f} frames/s (PNG+batch baseline "
                f"{headline[-2]['baseline']:.1f}); paced max lag {paced['encode_lag_s_max']:.2f} s"
            )
        report["commit_append_cost"] = append_cost(work)
        backend_frames = 60 if args.quick else 150
        pyav = pyav_backend(work, pools["front"], backend_frames)
        torchcodec = torchcodec_backend(work, pools["front"], backend_frames)
        report["backends_one_camera"] = {"pyav_15.1.0": pyav, "torchcodec_0.13.0": torchcodec}
        torchcodec_what = "torchcodec 0.13.0 (LeRobot's video backend) in the reference venv, same frames, same run"
        if "libsvtav1" not in torchcodec:
            torchcodec_what += f": not run ({torchcodec.get('skipped') or torchcodec.get('error')})"
        for key, name in (("encode_fps", "encode"), ("decode_random_fps", "random-access decode")):
            headline.append(
                figure(
                    f"PyAV libsvtav1 {name}, one camera",
                    value_of(pyav, "libsvtav1", key),
                    "frames/s",
                    baseline=value_of(torchcodec, "libsvtav1", key),
                    baseline_what=torchcodec_what,
                )
            )
    report = {"headline": headline, **report}
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / "dataset_writer.json"
    out.write_text(json.dumps(report, indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
