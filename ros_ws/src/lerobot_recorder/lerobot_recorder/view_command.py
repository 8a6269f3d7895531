"""`lerobot-ros view CONTRACT`: watch a running robot live in Rerun, and `lerobot-ros dataset view ROOT`.

Both log the same entities (lerobot_recorder.view) into a spawned viewer (default), a running one
(`--connect`), the web viewer (`--web [--port] [--host ADDRESS [--token-file FILE]]`, on loopback unless --host
names another address, and then only with a token) or an .rrd file (`--save FILE.rrd`).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lerobot_ros.command import Command, CommandError

if TYPE_CHECKING:
    from lerobot_recorder.view.sinks import Sink


def add_sink_arguments(parser: argparse.ArgumentParser) -> None:
    """--connect / --web [--port] [--host] [--token-file] / --save (default: spawn a viewer window); see
    lerobot_recorder.view.sinks."""
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--connect",
        nargs="?",
        const="rerun+http://127.0.0.1:9876/proxy",
        default=None,
        metavar="URL",
        help="send to a running Rerun viewer (default URL rerun+http://127.0.0.1:9876/proxy)",
    )
    where.add_argument("--web", action="store_true", help="serve the web viewer (open the printed URL in a browser)")
    where.add_argument("--save", type=Path, default=None, metavar="FILE.rrd", help="write an .rrd file instead")
    parser.add_argument("--port", type=int, default=9090, help="web viewer port with --web (default 9090)")
    parser.add_argument("--grpc-port", type=int, default=9876, help="data port of the viewer/web viewer (default 9876)")
    parser.add_argument(
        "--host",
        default=None,
        metavar="ADDRESS",
        help="with --web: the address the web viewer listens on (default 127.0.0.1, this machine only); another "
        "address (e.g. 0.0.0.0 for every interface) serves it beyond this machine, only with a token, while "
        "Rerun's data port stays on 127.0.0.1",
    )
    parser.add_argument(
        "--token-file",
        type=Path,
        default=None,
        metavar="FILE",
        help="with --web --host ADDRESS: the token is the first line of FILE (else $LEROBOT_ROS_VIEW_TOKEN, else a "
        "new random one each run); the printed URL carries it",
    )


def _add_common(parser: argparse.ArgumentParser) -> None:
    add_sink_arguments(parser)
    parser.add_argument(
        "--jpeg-quality",
        type=int,
        default=None,
        metavar="Q",
        help="camera pictures as JPEG of this quality (1..100), 0 = raw; default: 85 with --web (a browser "
        "takes raw pictures slowly), else raw",
    )


def _jpeg_quality(args: argparse.Namespace) -> int:
    """--jpeg-quality, or its default: JPEG 85 for the web viewer, raw pictures otherwise."""
    if args.jpeg_quality is None:
        return 85 if args.web else 0
    if not 0 <= args.jpeg_quality <= 100:
        raise CommandError(f"--jpeg-quality {args.jpeg_quality}: give 1..100, or 0 for raw pictures")
    return int(args.jpeg_quality)


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "contract", type=Path, metavar="CONTRACT", help="the robot's contract (config/contracts/*.yaml)"
    )
    parser.add_argument(
        "--image-rate", type=float, default=10.0, metavar="HZ", help="pictures shown per second and camera (default 10)"
    )
    parser.add_argument("--chunk-topic", default="/policy/action_chunk", help="ActionChunk topic ('' for none)")
    parser.add_argument("--recorder", default="/recorder", help="recorder node whose status is shown ('' for none)")
    parser.add_argument(
        "--duration", type=float, default=0.0, metavar="S", help="stop after S seconds (0 = until Ctrl-C)"
    )
    _add_common(parser)


def _open_sink(rec: object, args: argparse.Namespace) -> Sink:
    from lerobot_recorder.view.sinks import SinkChoice, ViewerUnavailableError, open_sink
    from lerobot_recorder.view.web import WebViewerError

    try:
        return open_sink(rec, SinkChoice.from_args(args))  # type: ignore[arg-type]
    except ViewerUnavailableError as err:
        raise CommandError(f"cannot show the view: {err}") from None
    except (ValueError, OSError, RuntimeError, WebViewerError) as err:
        raise CommandError(f"cannot open the view: {err}") from None


def _check_serving(sink: Sink) -> None:
    problem = sink.problem()
    if problem is not None:
        raise CommandError(f"the view stopped: {problem}", exit_code=1)


def _run(args: argparse.Namespace) -> int:
    if not 0.1 <= args.image_rate <= 120:
        raise CommandError(f"--image-rate {args.image_rate}: give 0.1..120 pictures per second")
    if args.duration < 0:
        raise CommandError("--duration must be >= 0")
    jpeg_quality = _jpeg_quality(args)
    from lerobot_contract import ContractError, load_contract

    try:
        contract = load_contract(args.contract)
    except (ContractError, OSError) as err:
        raise CommandError(f"{err}") from None

    import rerun as rr

    rec = rr.RecordingStream("lerobot_ros_view", send_properties=False)
    sink = _open_sink(rec, args)
    try:
        summary = _watch(args, contract, rec, sink, jpeg_quality)
    finally:
        sink.close()
    for topic in summary["missing"]:
        print(f"missing: no message on {topic} while viewing")
    print("view summary: " + json.dumps(summary), flush=True)
    if args.web:
        print("the web viewer stops with this command", flush=True)
    _check_serving(sink)
    return 0


def _watch(args: argparse.Namespace, contract: Any, rec: Any, sink: Sink, jpeg_quality: int) -> dict[str, Any]:
    """Run the Viewer node until Ctrl-C, --duration or the sink stops serving; returns the node's summary."""
    import rclpy
    from rclpy.parameter import Parameter

    from lerobot_recorder.nodes.viewer import Viewer
    from lerobot_recorder.view.entities import ViewLogger
    from lerobot_ros.command import stop_on_signals
    from lerobot_ros.dds import apply_ros_environment
    from lerobot_ros.executors import SingleThreadedExecutor

    apply_ros_environment()
    rclpy.init()
    stop = stop_on_signals()
    try:
        node = Viewer(
            contract,
            ViewLogger(rec, jpeg_quality=jpeg_quality),
            parameter_overrides=[
                Parameter("image_rate_hz", value=float(args.image_rate)),
                Parameter("chunk_topic", value=str(args.chunk_topic)),
                Parameter("recorder", value=str(args.recorder)),
            ],
        )
        executor = SingleThreadedExecutor()
        executor.add_node(node)
        print(f"{sink.where}; watching {len(contract.features)} contract topics (Ctrl-C to stop)", flush=True)
        start = next_check = time.monotonic()
        while not stop.is_set() and rclpy.ok():
            executor.spin_once(timeout_sec=0.1)
            now = time.monotonic()
            if args.duration and now - start >= args.duration:
                break
            if now >= next_check:
                next_check = now + 1.0
                if sink.problem() is not None:
                    break
        summary: dict[str, Any] = node.finish()
        executor.shutdown()
        node.destroy_node()
    finally:
        if rclpy.ok():
            rclpy.shutdown()
        rec.flush()
        if args.save is not None:
            rec.disconnect()
    return summary


def add_dataset_view_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "root",
        metavar="ROOT",
        help="dataset folder (holds meta/info.json), or a Hub dataset repo id (user/name) from the Hugging Face cache "
        "(downloaded there when not cached; with HF_HUB_OFFLINE=1 only the cache is used)",
    )
    parser.add_argument("--episode", type=int, default=0, metavar="N", help="episode index (default 0)")
    parser.add_argument(
        "--image-rate",
        type=float,
        default=0.0,
        metavar="HZ",
        help="pictures per second of episode time and camera (default 0: every frame)",
    )
    _add_common(parser)


def run_dataset_view(args: argparse.Namespace) -> int:
    from lerobot_dataset import DatasetError, DatasetReader

    if args.image_rate < 0:
        raise CommandError("--image-rate must be >= 0 (0 = every frame)")
    from lerobot_dataset.hub import HubError, resolve_dataset_root

    try:
        root = args.root = resolve_dataset_root(args.root)
    except HubError as err:
        raise CommandError(str(err)) from None
    if not (root / "meta" / "info.json").is_file():
        raise CommandError(
            f"{root} is not a LeRobot dataset (no meta/info.json); pass the dataset root folder or a Hub repo id"
        )
    try:
        reader = DatasetReader(root)
    except DatasetError as err:
        raise CommandError(f"cannot read {root}: {err}") from None
    import rerun as rr

    if not 0 <= args.episode < reader.num_episodes:
        raise CommandError(
            f"--episode {args.episode}: {root} has {reader.num_episodes} episode(s) (0..{reader.num_episodes - 1})"
        )
    rec = rr.RecordingStream("lerobot_ros_dataset_view", send_properties=False)
    sink = _open_sink(rec, args)
    try:
        _show_episode(args, reader, rec, sink)
    finally:
        sink.close()
    return 0


def _show_episode(args: argparse.Namespace, reader: Any, rec: Any, sink: Sink) -> None:
    from lerobot_dataset import DatasetError
    from lerobot_recorder.view.entities import EPISODE_TIME, ViewLogger
    from lerobot_recorder.view.episode import log_episode

    root: Path = args.root
    stride = 1 if not args.image_rate else max(1, round(reader.fps / args.image_rate))
    with reader:
        try:
            view = log_episode(
                ViewLogger(rec, timeline=EPISODE_TIME, jpeg_quality=_jpeg_quality(args)),
                reader,
                args.episode,
                image_stride=stride,
            )
        except DatasetError as err:
            raise CommandError(f"cannot show episode {args.episode} of {root}: {err}") from None
    rec.flush()
    print(sink.where)
    cameras = ", ".join(f"{k} ({n} pictures)" for k, n in view.cameras.items()) or "none"
    print(f"episode {view.episode_index}: {view.frames} frames; cameras: {cameras}; plots: {', '.join(view.vectors)}")
    if view.sync_report:
        print("sync report: shown under sync/")
    for problem in view.problems:
        print(f"warning: {problem}")
    if args.save is not None:
        rec.disconnect()
    elif args.web:
        _serve_until_stopped(sink)


def _serve_until_stopped(sink: Sink) -> None:
    from lerobot_ros.command import stop_on_signals

    stop = stop_on_signals()
    print("serving the web viewer (Ctrl-C to stop)", flush=True)
    while not stop.wait(0.5):
        _check_serving(sink)


VIEW = Command(
    name="view",
    help="watch a running robot live in Rerun: cameras, joints, actions, policy chunks, recorder, diagnostics",
    description=__doc__ or "",
    add_arguments=_add_arguments,
    run=_run,
)
