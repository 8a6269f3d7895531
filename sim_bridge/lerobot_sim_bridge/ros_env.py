"""`RosRobotEnv`: any ROS robot (real, fake hardware or the sim bridge) as a gymnasium env, via a contract.

`step(action)` converts the action from the contract's dataset units (LeRobot's: degrees, gripper 0..100)
to ROS units, publishes it on the contract's `action` topic stamped with the observation it answers (so a
lockstep sim bridge advances exactly one step), and waits for the next observation: the newest
`observation.*` sample of every feature stamped at or before the newest state sample, each within its
`max_age_s` of it (default: one frame period); against the sim bridge, which stamps every stream of a step
alike, the sample of that very step. That is the recorder's hold rule anchored at the state sample, not
`lerobot_contract.sampler.LiveSampler` (the policy node's): a lockstep bridge advances one step per action and
matches the action's stamp to its step, so the observation must be released as soon as the step's samples are
all there, at the step's own stamp, while the sampler places frames on an fps grid (phase measured over 10
frame periods) and releases them by the receiver's clock (a latency window, a receive-minus-stamp offset that
grows every step while sim time waits for the action), which would hold a camera frame still in flight for the
previous step's. While a step waits, an observation the robot sends again at the stamp the action answered (the
lockstep bridge re-sends its observation while no answer came) is answered again with the same command: an action
published before the robot's subscription matched it is lost, and the step would otherwise wait out its timeout.
`reset(seed=...)` calls the robot's
`sim/reset` service where there is one (the sim bridge), else it returns the current observation. A reset whose
reply has not come is sent again (after 1, 2, 4, ... s, within `step_timeout`) under the same request id, which
the bridge answers without resetting twice: a reply can be lost while discovery has not yet matched the reply's
path to this client, and the reset used to fail with "did not answer".
Reward, success and episode end are the step's own: against the sim bridge the observation is complete only with
the bridge's `sim/step_outcome` (lerobot_msgs/StepOutcome) stamped like its state sample; the unstamped
`sim/reward`, `sim/success` and `sim/episode_end` read as soon as the observation came could still hold the
previous step's values under load (the end missed: one more step, and the lockstep bridge waits for a reset that
never comes). A real robot has no outcome (reward 0, never ends).
"""

from __future__ import annotations

import secrets
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import rclpy
from builtin_interfaces.msg import Time as TimeMsg
from gymnasium import spaces
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rclpy.time import Time

from lerobot_contract import Contract, FeatureContract, MessageMismatchError, load_contract
from lerobot_msgs.msg import StepOutcome
from lerobot_msgs.srv import ResetEnv
from lerobot_ros.executors import SingleThreadedExecutor
from lerobot_ros.message_conversion import MessageTypeError, import_message_type
from lerobot_sim_bridge import topics
from lerobot_sim_bridge.errors import InvalidConfigError, SimBridgeError

ACTION_KEY = "action"
HISTORY = 32
SUBSCRIPTION_QOS = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
OUTCOME_QOS = QoSProfile(
    depth=topics.OUTCOME_QOS_DEPTH, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
)
# First wait for a reset's reply before the request is sent again (doubling after each try, within step_timeout).
RESET_RETRY_S = 1.0


class ObservationTimeoutError(SimBridgeError, TimeoutError):
    """No complete, fresh observation arrived in time (robot not running, topic or contract wrong)."""


def message_class(type_name: str) -> Any:
    """The Python class of a ROS message type `pkg/msg/Name` (InvalidConfigError when it is not installed)."""
    try:
        return import_message_type(type_name)
    except MessageTypeError as err:
        raise InvalidConfigError(str(err)) from None


def _seconds(stamp: TimeMsg) -> float:
    return float(Time.from_msg(stamp).nanoseconds) * 1e-9


class RosRobotEnv(gymnasium.Env[dict[str, np.ndarray], np.ndarray]):
    """A ROS robot behind the gymnasium API; see the module docstring.

    Args:
        contract: the robot contract (a `Contract` or the path of its YAML file); it needs an `action`
            feature on a `sensor_msgs/msg/JointState` topic and at least one `observation.*` vector feature.
        sim_namespace: where `sim/reset` and the `sim/...` topics live; default: the namespace of the
            action topic (`/follower/joint_commands` -> `/follower`).
        step_timeout: seconds to wait for the observation after an action (or after a reset).
        node: an rclpy node to use (spun by the caller); by default the env creates and spins its own.
        discovery_timeout: how long the first `reset` looks for the `sim/reset` service.
    """

    metadata = {"render_modes": ["rgb_array"]}  # noqa: RUF012 - gymnasium's class attribute

    def __init__(
        self,
        contract: Contract | str | Path,
        sim_namespace: str | None = None,
        step_timeout: float = 10.0,
        node: Node | None = None,
        discovery_timeout: float = 5.0,
    ) -> None:
        super().__init__()
        self.contract = contract if isinstance(contract, Contract) else load_contract(contract)
        features = self.contract.features
        if ACTION_KEY not in features or features[ACTION_KEY].is_image:
            raise InvalidConfigError(f"{self.contract.source}: RosRobotEnv needs a vector '{ACTION_KEY}' feature")
        self._action = features[ACTION_KEY]
        if self._action.type != "sensor_msgs/msg/JointState" or not self._action.joints:
            raise InvalidConfigError(
                f"{self.contract.source}: '{ACTION_KEY}' must be a sensor_msgs/msg/JointState with joints; "
                f"got {self._action.type}"
            )
        self._observations = {k: f for k, f in features.items() if k.startswith("observation.")}
        vectors = [k for k, f in self._observations.items() if not f.is_image]
        if not vectors:
            raise InvalidConfigError(f"{self.contract.source}: no observation.* vector feature to pace the env on")
        self._clock_key = "observation.state" if "observation.state" in vectors else vectors[0]
        self.step_timeout = step_timeout
        self.discovery_timeout = discovery_timeout
        self._has_reset: bool | None = None
        self.observation_space = spaces.Dict({k: self._space(f) for k, f in self._observations.items()})
        self.action_space = spaces.Box(-np.inf, np.inf, (self._action.size,), dtype=np.float32)
        namespace = sim_namespace if sim_namespace is not None else self._action.topic.rsplit("/", 1)[0]
        self._sim_ns = namespace.rstrip("/")

        self._own_context: Any = None
        self._executor: SingleThreadedExecutor | None = None
        if node is None:
            from lerobot_ros.dds import apply_ros_environment

            apply_ros_environment()
            self._own_context = rclpy.Context()
            rclpy.init(context=self._own_context)
            node = rclpy.create_node(f"ros_robot_env_{id(self):x}", context=self._own_context)
            self._executor = SingleThreadedExecutor(context=self._own_context)
            self._executor.add_node(node)
            threading.Thread(target=self._executor.spin, name="ros_robot_env", daemon=True).start()
        self.node = node

        self._lock = threading.Condition()
        self._history: dict[str, deque[tuple[float, Any]]] = {k: deque(maxlen=HISTORY) for k in self._observations}
        self._outcomes: deque[tuple[float, Any]] = deque(maxlen=HISTORY)
        self._last_stamp: TimeMsg | None = None
        # Reset request ids: a random high half per env, so envs sharing a bridge never reuse one another's.
        self._reset_id_base = secrets.randbits(31) << 32
        self._resets_sent = 0
        self.reset_retries = 0
        # The command of the step in flight; `_resend` is set when the robot re-sends the observation it answers.
        self._pending_command: Any = None
        self._resend = False
        self.resent_commands = 0
        self._subscriptions = [
            node.create_subscription(message_class(f.type), f.topic, self._store(k), SUBSCRIPTION_QOS)
            for k, f in self._observations.items()
        ]
        self._subscriptions.append(
            node.create_subscription(
                StepOutcome, f"{self._sim_ns}/{topics.SIM_STEP_OUTCOME}", self._on_outcome, OUTCOME_QOS
            )
        )
        self._command_pub = node.create_publisher(
            message_class(self._action.type), self._action.topic, SUBSCRIPTION_QOS
        )
        self._reset_client = node.create_client(ResetEnv, f"{self._sim_ns}/{topics.SIM_RESET}")

    @staticmethod
    def _space(feature: FeatureContract) -> spaces.Space[Any]:
        if feature.is_image:
            return spaces.Box(0, 255, feature.shape, dtype=np.uint8)
        return spaces.Box(-np.inf, np.inf, (feature.size,), dtype=np.float32)

    def _store(self, key: str) -> Any:
        def on_message(msg: Any) -> None:
            stamp = _seconds(msg.header.stamp)
            with self._lock:
                self._history[key].append((stamp, msg))
                if key == self._clock_key and self._pending_command is not None and stamp <= self._last_time():
                    self._resend = True  # the robot is still at the observation the command answers
                self._lock.notify_all()

        return on_message

    def _on_outcome(self, msg: Any) -> None:
        with self._lock:
            self._outcomes.append((_seconds(msg.header.stamp), msg))
            self._lock.notify_all()

    def _outcome_at(self, stamp: float) -> Any:
        """The step outcome stamped exactly like the observation at `stamp`, or None."""
        for outcome_stamp, outcome in reversed(self._outcomes):
            if outcome_stamp == stamp:
                return outcome
        return None

    def _assemble(self, after: float) -> tuple[float, TimeMsg, dict[str, Any]] | None:
        """The observation of the newest state sample stamped after `after`, if every feature has a fresh one."""
        clock = self._history[self._clock_key]
        if not clock or clock[-1][0] <= after:
            return None
        frame_time, frame_msg = clock[-1]
        messages = {}
        for key, feature in self._observations.items():
            candidates = [(t, m) for t, m in self._history[key] if t <= frame_time + 1e-9]
            if not candidates:
                return None
            stamp, msg = candidates[-1]
            if self._has_reset and stamp != frame_time:
                # The sim bridge stamps every stream of a step alike; a camera frame still in flight when the
                # joint states arrived would otherwise be replaced by the previous step's (the observation then
                # depended on delivery timing; a lockstep evaluation was not repeatable under load).
                return None
            max_age = feature.max_age_s if feature.max_age_s is not None else 1.0 / self.contract.fps
            if frame_time - stamp > max_age:
                return None
            messages[key] = msg
        return frame_time, frame_msg.header.stamp, messages

    def _complete(self, after: float) -> tuple[dict[str, Any], Any] | None:
        """The observation's messages and its step outcome, once both are here (see the module docstring)."""
        found = self._assemble(after)
        if found is None:
            return None
        frame_time, stamp, messages = found
        outcome = self._outcome_at(frame_time)
        if outcome is None and self._has_reset:
            return None  # the sim bridge: the step's own reward and episode end are part of the observation
        self._last_stamp = stamp
        return messages, outcome

    def _wait_observation(self, after: float) -> tuple[dict[str, np.ndarray], Any]:
        """The next complete observation (dataset units) and its step outcome (None from a robot without one)."""
        deadline = time.monotonic() + self.step_timeout
        with self._lock:
            while (found := self._complete(after)) is None:
                if self._resend and self._pending_command is not None:
                    self._resend = False
                    self.resent_commands += 1
                    self._command_pub.publish(self._pending_command)
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    latest = {k: (h[-1][0] if h else None) for k, h in self._history.items()}
                    if self._has_reset:
                        latest[topics.SIM_STEP_OUTCOME] = self._outcomes[-1][0] if self._outcomes else None
                    raise ObservationTimeoutError(
                        f"no complete observation newer than t={after:.3f} within {self.step_timeout} s; newest "
                        f"stamps per feature: {latest}; is the robot running and does the contract match its topics?"
                    )
                self._lock.wait(min(remaining, 0.05))
        messages, outcome = found
        try:
            return {key: self._observations[key].value(msg) for key, msg in messages.items()}, outcome
        except MessageMismatchError as err:
            raise InvalidConfigError(str(err)) from None

    def _last_time(self) -> float:
        return _seconds(self._last_stamp) if self._last_stamp is not None else -1.0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Reset the simulation (seeded) where the robot has `sim/reset`; return the first observation."""
        super().reset(seed=seed)
        info: dict[str, Any] = {}
        after = -1.0
        if self._has_reset is None:
            # First reset: give discovery time to find a bridge; a robot without one is remembered.
            self._has_reset = self._reset_client.wait_for_service(timeout_sec=self.discovery_timeout)
        if self._has_reset and self._reset_client.wait_for_service(timeout_sec=self.step_timeout):
            self._resets_sent += 1
            request = ResetEnv.Request(
                use_seed=seed is not None, seed=seed or 0, request_id=self._reset_id_base + self._resets_sent
            )
            response = self._call_reset(request)
            if not response.success:
                raise SimBridgeError(f"reset failed: {response.message}")
            after = _seconds(response.stamp) - 1e-9
            info.update(seed=int(response.seed), episode_index=int(response.episode_index))
        else:
            info["reset"] = f"no {self._reset_client.srv_name} service: the robot continues where it is"
        observation, _ = self._wait_observation(after)
        return observation, info

    def _call_reset(self, request: Any) -> Any:
        """Call `sim/reset`, sending the same request again while no reply came; the first reply wins."""
        answered = threading.Event()
        futures: list[Any] = []
        deadline = time.monotonic() + self.step_timeout
        wait = RESET_RETRY_S
        try:
            while True:
                future = self._reset_client.call_async(request)
                future.add_done_callback(lambda _f: answered.set())
                futures.append(future)
                answered.wait(max(min(wait, deadline - time.monotonic()), 0.0))
                for sent in futures:
                    if sent.done() and sent.result() is not None:
                        return sent.result()
                answered.clear()
                if time.monotonic() >= deadline:
                    raise ObservationTimeoutError(
                        f"{self._reset_client.srv_name} did not answer within {self.step_timeout} s "
                        f"({len(futures)} tries of request {request.request_id}); is the sim bridge running?"
                    )
                # Lost (the reply's path not matched yet) or late (the bridge still resetting): the same id
                # again, which the bridge answers without resetting twice.
                self.reset_retries += 1
                wait *= 2
        finally:
            for sent in futures:
                if not sent.done():
                    self._reset_client.remove_pending_request(sent)
                    sent.cancel()

    def step(self, action: np.ndarray) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        """Send `action` (dataset units) and return the next observation, reward, terminated, truncated, info."""
        values = np.asarray(action, dtype=np.float64).reshape(-1)
        if values.shape != (self._action.size,) or not np.all(np.isfinite(values)):
            raise InvalidConfigError(f"action must be {self._action.size} finite values, got {action!r}")
        command = message_class(self._action.type)()
        if self._last_stamp is not None:
            command.header.stamp = self._last_stamp
        command.name = list(self._action.joints or ())
        command.position = [float(x) for x in self._action.joint_units().inverse(values)]
        with self._lock:
            self._pending_command, self._resend = command, False
        self._command_pub.publish(command)
        try:
            observation, outcome = self._wait_observation(self._last_time())
        finally:
            with self._lock:
                self._pending_command = None
        if outcome is None:  # a real robot: no reward, no end
            return observation, 0.0, False, False, {"is_success": False, "episode_end": ""}
        end = str(outcome.episode_end)
        info = {
            "is_success": bool(outcome.success) or end == "success",
            "episode_end": end,
            "episode_index": int(outcome.episode_index),
            "step_index": int(outcome.step_index),
        }
        return observation, float(outcome.reward), bool(outcome.terminated), bool(outcome.truncated), info

    def close(self) -> None:
        """Stop the env's own node (a node passed in is left to its owner)."""
        if self._own_context is not None:
            if self._executor is not None:
                self._executor.shutdown(timeout_sec=2.0)
            self.node.destroy_node()
            self._own_context.try_shutdown()
            self._own_context = None
