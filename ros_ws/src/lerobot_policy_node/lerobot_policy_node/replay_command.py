"""`lerobot-ros replay`: send a recorded episode's actions to a robot through the action executor.

Like LeRobot's `lerobot-replay`, for a robot on ROS 2 (the arm driver, the sim bridge or ros2_control): the
episode's `action` column is converted back to ROS units with the dataset's contract (meta/contract.json, or
--contract), starts from where the robot is (a linear approach of --approach seconds to the first action), and
goes out as one ActionChunk through an action executor (the joints, position limits and velocity limit of
--robot-config, hold at the end) started here in the robot's namespace, or through a running one
(--chunk-topic). Ctrl-C stops the robot where it is (the executor's ~/enable false). Prints how closely the
measured joint_states tracked it.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

from lerobot_contract.time import NS
from lerobot_ros.command import Command, CommandError, stop_on_signals


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dataset", type=Path, metavar="DATASET", help="dataset folder (holds meta/info.json)")
    parser.add_argument("--episode", type=int, required=True, metavar="N", help="episode index to replay")
    parser.add_argument(
        "--namespace", default=None, help="robot namespace (default: that of the contract's action topic)"
    )
    parser.add_argument("--contract", type=Path, default=None, help="contract YAML (default: meta/contract.json)")
    parser.add_argument(
        "--robot-config",
        type=Path,
        default=None,
        metavar="FILE",
        help="robot configuration (config/robots/*.yaml): the executor's joints, limits and max velocity",
    )
    parser.add_argument("--approach", type=float, default=2.0, metavar="S", help="seconds to reach the first action")
    parser.add_argument(
        "--output", default="joint_trajectory", choices=("joint_trajectory", "joint_commands"), help="executor output"
    )
    parser.add_argument(
        "--max-velocity", type=float, default=0.0, metavar="RAD_S", help="lower speed cap than the robot config's"
    )
    parser.add_argument(
        "--chunk-topic",
        default=None,
        metavar="TOPIC",
        help="send to a running executor's chunk topic instead of starting one here",
    )
    parser.add_argument("--use-sim-time", action="store_true", help="run on /clock (a sim bridge in fast mode)")
    parser.add_argument("--wait", type=float, default=30.0, metavar="S", help="how long to wait for the robot")


def _run(args: argparse.Namespace) -> int:
    import numpy as np

    from lerobot_contract import ContractError
    from lerobot_dataset import DatasetReader
    from lerobot_dataset.errors import DatasetError
    from lerobot_policy_node.core.errors import ObservationError, PolicyConfigError
    from lerobot_policy_node.core.observations import ActionMapping
    from lerobot_policy_node.core.replay import replay_plan

    if args.approach < 0 or args.max_velocity < 0 or args.wait <= 0:
        raise CommandError("--approach and --max-velocity must be >= 0 and --wait > 0")
    if args.chunk_topic is None and args.robot_config is None:
        raise CommandError(
            "pass --robot-config config/robots/<robot>.yaml (the executor's joints, position limits and max "
            "velocity), or --chunk-topic TOPIC to send through an executor that is already running"
        )
    if args.robot_config is not None and not args.robot_config.is_file():
        raise CommandError(f"--robot-config {args.robot_config}: no such file")
    try:
        reader = DatasetReader(args.dataset)
    except (DatasetError, OSError) as err:
        raise CommandError(f"cannot open dataset {args.dataset}: {err}") from None
    with reader:
        if not 0 <= args.episode < reader.num_episodes:
            raise CommandError(
                f"{args.dataset} has episodes 0..{reader.num_episodes - 1}; --episode {args.episode} is not one"
            )
        spec = reader.features.get("action")
        if spec is None:
            raise CommandError(f"{args.dataset} has no `action` feature to replay")
        actions = np.asarray(reader.episode_frames(args.episode, "action"), dtype=np.float64)
        fps = float(reader.fps)
        try:
            contract = _contract(args)
            mapping = ActionMapping(contract, int(actions.shape[1]), spec.names)
        except (ContractError, ObservationError) as err:
            raise CommandError(str(err)) from None
    action_topic = contract.features["action"].topic
    namespace = args.namespace if args.namespace is not None else action_topic.rsplit("/", 1)[0] or "/"
    if not namespace.startswith("/"):
        namespace = "/" + namespace
    ros_actions = mapping.to_ros(actions)
    try:
        replay_plan(mapping.joint_names, ros_actions, fps, None, args.approach)  # validate before touching ROS
    except PolicyConfigError as err:
        raise CommandError(f"episode {args.episode}: {err}") from None
    summary = _replay(args, namespace, mapping.joint_names, ros_actions, fps)
    print(json.dumps(summary, indent=2))
    return 0 if not summary["stopped"] else 1


def _contract(args: argparse.Namespace) -> Any:
    from lerobot_contract import Contract, ContractError

    if args.contract is not None:
        return Contract.load(args.contract)
    stored = args.dataset / "meta" / "contract.json"
    if not stored.is_file():
        raise CommandError(f"{args.dataset} has no meta/contract.json; pass --contract FILE (the robot's contract)")
    try:
        data = json.loads(stored.read_text())
    except (OSError, ValueError) as err:
        raise ContractError(str(stored), "<file>", f"cannot read: {err}") from None
    return Contract.from_dict(data, source=str(stored))


def _replay(args: argparse.Namespace, namespace: str, joints: tuple[str, ...], actions: Any, fps: float) -> Any:
    import numpy as np
    import rclpy
    from rclpy.lifecycle import TransitionCallbackReturn
    from rclpy.parameter import Parameter
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from rclpy.time import Time
    from sensor_msgs.msg import JointState
    from std_srvs.srv import SetBool

    from lerobot_msgs.msg import ActionChunk
    from lerobot_policy_node.core.errors import PolicyConfigError
    from lerobot_policy_node.core.replay import replay_plan
    from lerobot_policy_node.nodes.executor_node import ExecutorNode
    from lerobot_ros.dds import apply_ros_environment
    from lerobot_ros.executors import ThreadPoolExecutor

    apply_ros_environment()
    rclpy.init()
    stop = stop_on_signals()
    sim_time = Parameter("use_sim_time", value=bool(args.use_sim_time))
    node = rclpy.create_node("replay", namespace=namespace, parameter_overrides=[sim_time])
    executor_node = None
    chunk_topic = args.chunk_topic or f"{namespace.rstrip('/')}/replay/action_chunk"
    if args.chunk_topic is None:
        executor_node = ExecutorNode(
            namespace=namespace,
            parameter_overrides=[
                sim_time,
                Parameter("chunk_topic", value=chunk_topic),
                Parameter("output", value=args.output),
                Parameter("robot_config", value=str(args.robot_config.resolve())),
                Parameter("joint_names", value=list(joints)),
                Parameter("max_velocity", value=float(args.max_velocity)),
                Parameter("autostart", value=False),
            ],
        )
    executor_fqn = f"{namespace.rstrip('/')}/action_executor"
    lock = threading.Lock()
    measured: list[tuple[int, list[float]]] = []

    def on_state(msg: JointState) -> None:
        index = {n: i for i, n in enumerate(msg.name)}
        if all(j in index for j in joints) and len(msg.position) == len(msg.name):
            stamp = Time.from_msg(msg.header.stamp).nanoseconds or node.get_clock().now().nanoseconds
            with lock:
                measured.append((stamp, [float(msg.position[index[j]]) for j in joints]))

    node.create_subscription(JointState, "joint_states", on_state, QoSProfile(depth=50))
    chunk_pub = node.create_publisher(
        ActionChunk, chunk_topic, QoSProfile(depth=5, reliability=ReliabilityPolicy.RELIABLE)
    )
    # As in the executor's own main: its tick thread gets the GIL back within 1 ms, and the callbacks run on
    # ThreadPoolExecutor, not rclpy's MultiThreadedExecutor, whose spinning thread resubmits waiting handlers
    # in a loop that holds the GIL (lerobot_ros.executors).
    sys.setswitchinterval(0.001)
    spin = ThreadPoolExecutor(num_threads=2)
    spin.add_node(node)
    if executor_node is not None:
        spin.add_node(executor_node)
    spinner = threading.Thread(target=spin.spin, name="replay-spin", daemon=True)
    spinner.start()
    summary: dict[str, Any] = {}
    try:
        if executor_node is not None and (
            executor_node.trigger_configure() != TransitionCallbackReturn.SUCCESS
            or executor_node.trigger_activate() != TransitionCallbackReturn.SUCCESS
        ):
            raise CommandError("the action executor did not start (see its log above)")
        state_topic = f"{namespace.rstrip('/')}/joint_states"
        deadline = time.monotonic() + args.wait
        # On sim time a clock at 0 has not been set yet: a chunk stamped 0 is refused, and an executor at 0
        # would take a chunk from the sim's time as from the future.
        clocks = [n.get_clock() for n in (node, executor_node) if n is not None]

        def robot_missing() -> bool:
            """The executor started here has no subscriber on its output yet: what it sent would be lost."""
            output = executor_node.output if executor_node is not None else None
            return output is not None and output[1] == 0

        while (
            not measured
            or chunk_pub.get_subscription_count() == 0
            or any(c.now().nanoseconds == 0 for c in clocks)
            or robot_missing()
        ):
            if stop.is_set():
                raise CommandError("stopped before the replay started", exit_code=1)
            if time.monotonic() > deadline:
                if any(c.now().nanoseconds == 0 for c in clocks):
                    raise CommandError(
                        f"--use-sim-time: no /clock within {args.wait} s; is the simulation publishing /clock?"
                    )
                if not measured:
                    raise CommandError(
                        f"no joint_states with joints {list(joints)} on {state_topic} within {args.wait} s: is the "
                        "robot (arm driver, sim bridge) running in that namespace? (--namespace)"
                    )
                if robot_missing():
                    assert executor_node is not None and executor_node.output is not None
                    raise CommandError(
                        f"nothing subscribes to {executor_node.output[0]} within {args.wait} s: does the robot take "
                        f"{args.output}? (--output)"
                    )
                raise CommandError(f"no action executor subscribes to {chunk_topic} within {args.wait} s")
            time.sleep(0.02)
        with lock:
            start = np.asarray(measured[-1][1])
        try:
            plan = replay_plan(joints, actions, fps, start, args.approach)
        except PolicyConfigError as err:
            raise CommandError(str(err)) from None
        stamp_ns = node.get_clock().now().nanoseconds
        msg = ActionChunk()
        msg.header.stamp = Time(nanoseconds=stamp_ns).to_msg()
        msg.names = list(joints)
        msg.horizon = int(plan.targets.shape[0])
        msg.period.sec, msg.period.nanosec = divmod(plan.period_ns, NS)
        msg.data = plan.targets.astype(np.float32).reshape(-1).tolist()
        msg.chunk_id = 1
        msg.policy = f"replay:{args.dataset.name}#{args.episode}"
        chunk_pub.publish(msg)
        print(
            f"replaying episode {args.episode} ({plan.frames} frames at {fps:g} fps, {args.approach:g} s approach) "
            f"on {namespace} (Ctrl-C stops the robot)",
            flush=True,
        )
        end_ns = stamp_ns + plan.duration_ns + NS // 2  # half a second to settle on the last target
        while node.get_clock().now().nanoseconds < end_ns and not stop.is_set():
            time.sleep(0.02)
        if stop.is_set():
            _disable(node, executor_fqn, SetBool)
        with lock:
            stamps = np.array([s for s, _ in measured], dtype=np.int64)
            positions = np.array([p for _, p in measured], dtype=np.float64)
        episode_start = plan.episode_start_ns(stamp_ns)
        window = (stamps >= episode_start) & (stamps <= stamp_ns + plan.duration_ns)
        error = positions[window] - plan.expected(stamp_ns, stamps[window]) if window.any() else np.zeros((0, 0))
        summary = {
            "episode": args.episode,
            "frames": plan.frames,
            "fps": fps,
            "namespace": namespace,
            "joints": list(joints),
            "stamp_ns": stamp_ns,
            "episode_start_ns": episode_start,
            "period_ns": plan.period_ns,
            "approach_steps": plan.approach_steps,
            "joint_states_in_episode": int(window.sum()),
            "tracking_rms_rad": np.sqrt(np.mean(error**2, axis=0)).round(5).tolist() if error.size else None,
            "stopped": stop.is_set(),
        }
    finally:
        spin.shutdown(timeout_sec=2.0)
        spinner.join(timeout=5)
        if executor_node is not None:
            executor_node.stop_thread()
            executor_node.destroy_node()
        node.destroy_node()
        if rclpy.ok():
            rclpy.shutdown()
    return summary


def _disable(node: Any, executor_fqn: str, srv_type: Any) -> None:
    """Software stop: the executor holds where the robot is (best effort, 2 s)."""
    client = node.create_client(srv_type, f"{executor_fqn}/enable")
    if client.wait_for_service(timeout_sec=2.0):
        done = threading.Event()
        future = client.call_async(srv_type.Request(data=False))
        future.add_done_callback(lambda _f: done.set())
        done.wait(2.0)
    node.destroy_client(client)


COMMAND = Command(
    name="replay",
    help="replay a dataset episode's actions on a robot through the action executor",
    add_arguments=_add_arguments,
    run=_run,
    description=__doc__ or "",
)
