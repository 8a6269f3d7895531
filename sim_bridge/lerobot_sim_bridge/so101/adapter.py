"""SO-101 pick-and-place from `lerobot-env-so101`, stepped with joint position targets.

Physics and the task (block and goal sampling, carried/placed success, out-of-workspace termination)
are the package's `SO101PickPlaceGymEnv`; only its action is replaced: instead of Cartesian deltas through
the IK, the six `<position>` actuators take joint targets directly, as a real SO-101 driver does.
Rendering uses a second, kinematics-only model with the simplified meshes (`render_assets`), a goal
marker and an optional wrist camera, so cameras never change the physics.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from pathlib import Path
from typing import Any

import numpy as np

from lerobot_sim_bridge.adapters.base import (
    CameraConfig,
    CameraIntrinsics,
    FloatArray,
    ImageArray,
    ObjectPose,
    SimAdapter,
    SimConfig,
    StepOutcome,
)
from lerobot_sim_bridge.errors import InvalidConfigError, RenderingUnavailableError
from lerobot_sim_bridge.so101.render_assets import derive_render_meshes, source_mesh_dir

JOINT_NAMES = ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper")
FRONT_CAMERA = "front"
WRIST_CAMERA = "wrist"
WRIST_CAMERA_FOVY = 70.0
# In the `gripper` body frame the jaws point along -z; the camera sits on the wrist servo looking past the
# fixed jaw toward the fingertips, like the usual SO-101 wrist camera mount.
WRIST_CAMERA_POS = (0.0, -0.05, -0.01)
WRIST_CAMERA_XYAXES = (1.0, 0.0, 0.0, 0.0, 0.87, 0.49)
GOAL_MARKER_RGBA = (0.2, 0.8, 0.3, 0.5)
GOAL_MARKER_SIZE = (0.025, 0.001, 0.0)
VALID_GL_BACKENDS = ("egl", "osmesa", "glfw")


def check_gl_backend(environ: dict[str, str] | os._Environ[str] = os.environ) -> str:
    """The MuJoCo GL backend named by `MUJOCO_GL`; raises when it is unset or not one MuJoCo knows."""
    backend = environ.get("MUJOCO_GL", "")
    if backend.lower() not in VALID_GL_BACKENDS:
        shown = repr(backend) if backend else "unset"
        raise RenderingUnavailableError(
            f"MUJOCO_GL is {shown}; cameras need headless OpenGL: set MUJOCO_GL=egl (Mesa EGL, apt package "
            "libegl1) or MUJOCO_GL=osmesa, or configure no cameras"
        )
    return backend.lower()


def _make_env(config: SimConfig) -> Any:
    import mujoco
    from lerobot_env_so101.pick_place_env import SO101PickPlaceGymEnv

    class JointLevelPickPlaceEnv(SO101PickPlaceGymEnv):  # type: ignore[misc]
        """The package's pick-and-place task whose action is the six actuator targets (radians)."""

        def apply_action(self, action: np.ndarray) -> None:
            self._data.ctrl[self._arm_ctrl_ids] = action[: len(self._arm_ctrl_ids)]
            self._data.ctrl[self._gripper_ctrl_id] = action[len(self._arm_ctrl_ids)]
            for _ in range(self._n_substeps):
                mujoco.mj_step(self._model, self._data)

    options = dict(config.options)
    random_poses = bool(options.pop("random_block_position", True))
    if options:
        raise InvalidConfigError(f"so101_pick_place: unknown options {sorted(options)}; known: random_block_position")
    env = JointLevelPickPlaceEnv(
        control_dt=config.control_dt,
        physics_dt=config.control_dt / config.substeps,
        random_block_position=random_poses,
    )
    # control_dt // physics_dt can round down by one substep in floating point.
    env._n_substeps = config.substeps
    return env


def load_triton_before_gl() -> None:
    """Import Triton, when installed (PyPI's Linux torch brings it), before MuJoCo's first OpenGL context: Mesa's
    EGL/OSMesa driver loads the system's LLVM, and Triton's own LLVM loaded after it crashes the process (SIGSEGV in
    `import triton`, which torch does at its first optimizer or torch.compile); loaded first, both work."""
    if importlib.util.find_spec("triton") is not None:
        importlib.import_module("triton")


class _CameraRenderer:
    """Renders the kinematics-only render model for cameras of one image size."""

    def __init__(self, model: Any, width: int, height: int) -> None:
        load_triton_before_gl()
        import mujoco

        self._mujoco = mujoco
        try:
            self.renderer = mujoco.Renderer(model, height=height, width=width)
        except Exception as exc:  # MuJoCo raises several types (FatalError, RuntimeError, ...) for GL failures
            raise RenderingUnavailableError(
                f"cannot create an OpenGL context with MUJOCO_GL={os.environ.get('MUJOCO_GL', '')!r}: {exc}; "
                "install Mesa EGL (apt package libegl1) and set MUJOCO_GL=egl, or configure no cameras"
            ) from None
        self.option = mujoco.MjvOption()

    def render(self, data: Any, camera: str, out: ImageArray) -> ImageArray:
        mjt = self._mujoco.mjtRndFlag
        self.renderer.update_scene(data, camera=camera, scene_option=self.option)
        self.renderer.scene.flags[mjt.mjRND_SHADOW] = 0
        self.renderer.scene.flags[mjt.mjRND_REFLECTION] = 0
        self.renderer.scene.flags[mjt.mjRND_SKYBOX] = 0
        return self.renderer.render(out=out)  # type: ignore[no-any-return]

    def close(self) -> None:
        self.renderer.close()


def _xyaxes_to_quat(xyaxes: tuple[float, ...]) -> FloatArray:
    """MuJoCo's `xyaxes` orientation (camera x and y axes in the parent frame) as a (w, x, y, z) quaternion."""
    import mujoco

    x_axis = np.asarray(xyaxes[:3], dtype=np.float64)
    x_axis /= np.linalg.norm(x_axis)
    y_axis = np.asarray(xyaxes[3:], dtype=np.float64)
    y_axis -= x_axis * float(x_axis @ y_axis)
    y_axis /= np.linalg.norm(y_axis)
    rotation = np.column_stack([x_axis, y_axis, np.cross(x_axis, y_axis)])
    quat = np.zeros(4)
    mujoco.mju_mat2Quat(quat, rotation.reshape(-1))
    return quat


def _build_render_model(mesh_dir: Path, max_width: int, max_height: int) -> Any:
    import mujoco

    scene = source_mesh_dir().parent / "pick_scene.xml"
    spec = mujoco.MjSpec.from_file(str(scene))
    spec.meshdir = str(mesh_dir)
    gripper = spec.body("gripper")
    gripper.add_camera(
        name=WRIST_CAMERA,
        pos=list(WRIST_CAMERA_POS),
        fovy=WRIST_CAMERA_FOVY,
        quat=list(_xyaxes_to_quat(WRIST_CAMERA_XYAXES)),
    )
    # A mocap body: kinematics moves it to the goal each frame (world-body geoms are static).
    marker = spec.worldbody.add_body(name="goal_marker", mocap=True)
    marker.add_geom(
        name="goal_marker",
        type=mujoco.mjtGeom.mjGEOM_CYLINDER,
        size=list(GOAL_MARKER_SIZE),
        rgba=list(GOAL_MARKER_RGBA),
        contype=0,
        conaffinity=0,
        group=2,
    )
    for light in spec.lights:
        light.castshadow = False
    model = spec.compile()
    model.vis.quality.offsamples = 0
    model.vis.global_.offwidth = max(max_width, 1)
    model.vis.global_.offheight = max(max_height, 1)
    return model


class SO101Adapter(SimAdapter):
    """The SO-101 pick-and-place task behind the `SimAdapter` interface (joint targets in radians)."""

    def __init__(self, config: SimConfig, render_mesh_dir: Path | None = None) -> None:
        if config.cameras or os.environ.get("MUJOCO_GL"):
            # MuJoCo refuses to import at all with an unknown MUJOCO_GL; say so before it does.
            check_gl_backend()
        try:
            import mujoco
        except (ImportError, RuntimeError) as exc:
            raise RenderingUnavailableError(
                f"cannot import mujoco ({exc}); install the pinned mujoco and set MUJOCO_GL=egl"
            ) from None

        for camera in config.cameras:
            if camera.name not in (FRONT_CAMERA, WRIST_CAMERA):
                raise InvalidConfigError(
                    f"so101_pick_place has cameras {FRONT_CAMERA!r} and {WRIST_CAMERA!r}, not {camera.name!r}"
                )
        self._mujoco = mujoco
        self._config = config
        self._env = _make_env(config)
        model = self._env.model
        self._qpos_adr = np.array([model.joint(name).qposadr[0] for name in JOINT_NAMES])
        self._dof_adr = np.array([model.joint(name).dofadr[0] for name in JOINT_NAMES])
        self._actuator_ids = np.array([model.actuator(name).id for name in JOINT_NAMES])
        self._limits = np.array(model.actuator_ctrlrange[self._actuator_ids], dtype=np.float64)
        self._renderers: dict[tuple[int, int], _CameraRenderer] = {}
        self._frames: dict[str, ImageArray] = {}
        self._render_model: Any = None
        self._render_data: Any = None
        if config.cameras:
            check_gl_backend()
            mesh_dir = derive_render_meshes(render_mesh_dir)
            self._render_model = _build_render_model(
                mesh_dir, max(c.width for c in config.cameras), max(c.height for c in config.cameras)
            )
            self._render_data = mujoco.MjData(self._render_model)
            self._goal_mocap = int(self._render_model.body("goal_marker").mocapid[0])
            # A GL context is current in the thread that created it, so renderers are made by the thread
            # that renders first; this probe only makes a missing or broken GL fail here, at start-up.
            _CameraRenderer(self._render_model, 16, 16).close()
            for camera in config.cameras:
                self._frames[camera.name] = np.zeros((camera.height, camera.width, 3), dtype=np.uint8)
        self._targets = np.zeros(len(JOINT_NAMES))
        self.reset(None)

    @property
    def joint_names(self) -> tuple[str, ...]:
        return JOINT_NAMES

    @property
    def joint_limits(self) -> FloatArray:
        return self._limits.copy()

    @property
    def control_dt(self) -> float:
        return self._config.control_dt

    @property
    def cameras(self) -> tuple[CameraConfig, ...]:
        return self._config.cameras

    @property
    def env(self) -> Any:
        """The underlying `SO101PickPlaceGymEnv` (for experts and tests that need privileged state)."""
        return self._env

    def reset(self, seed: int | None) -> None:
        self._env.reset(seed=seed)
        self._targets = self.joint_positions()
        # Hold the reset pose: the package leaves the gripper actuator at ctrl 0 after a reset.
        self._env.data.ctrl[self._actuator_ids] = self._targets

    def step(self, targets: FloatArray) -> StepOutcome:
        self._targets = np.clip(targets, self._limits[:, 0], self._limits[:, 1])
        _, reward, terminated, truncated, info = self._env.step(self._targets)
        return StepOutcome(float(reward), bool(info["succeed"]), bool(terminated), bool(truncated))

    def joint_positions(self) -> FloatArray:
        return np.array(self._env.data.qpos[self._qpos_adr], dtype=np.float64)

    def joint_velocities(self) -> FloatArray:
        return np.array(self._env.data.qvel[self._dof_adr], dtype=np.float64)

    def joint_efforts(self) -> FloatArray:
        return np.array(self._env.data.actuator_force[self._actuator_ids], dtype=np.float64)

    def success(self) -> bool:
        return bool(self._env._is_success())

    def object_poses(self) -> tuple[ObjectPose, ...]:
        data = self._env.data
        block_pos = data.sensor("block_pos").data
        block_quat = data.sensor("block_quat").data
        goal = self._env.goal_pos
        return (
            ObjectPose(
                "block", (float(block_pos[0]), float(block_pos[1]), float(block_pos[2])), tuple_quat(block_quat)
            ),
            ObjectPose("goal", (float(goal[0]), float(goal[1]), float(goal[2]))),
        )

    def render(self, camera: str) -> ImageArray:
        config = next((c for c in self._config.cameras if c.name == camera), None)
        if config is None:
            raise InvalidConfigError(
                f"camera {camera!r} is not configured; configured: {[c.name for c in self.cameras]}"
            )
        self._render_data.qpos[:] = self._env.data.qpos
        goal = self._env.goal_pos
        self._render_data.mocap_pos[self._goal_mocap] = (goal[0], goal[1], GOAL_MARKER_SIZE[1])
        # Cameras and lights need mj_comPos/mj_camlight after the kinematics; no dynamics are computed.
        self._mujoco.mj_kinematics(self._render_model, self._render_data)
        self._mujoco.mj_comPos(self._render_model, self._render_data)
        self._mujoco.mj_camlight(self._render_model, self._render_data)
        frame = self._frames[camera]
        size = (config.width, config.height)
        if size not in self._renderers:
            self._renderers[size] = _CameraRenderer(self._render_model, *size)
        self._renderers[size].render(self._render_data, camera, frame)
        return frame

    def intrinsics(self, camera: str) -> CameraIntrinsics:
        config = next((c for c in self._config.cameras if c.name == camera), None)
        if config is None:
            raise InvalidConfigError(f"camera {camera!r} is not configured")
        fovy = WRIST_CAMERA_FOVY if camera == WRIST_CAMERA else float(self._render_model.camera(camera).fovy[0])
        return CameraIntrinsics.from_fovy(config.width, config.height, fovy)

    def close(self) -> None:
        for renderer in self._renderers.values():
            renderer.close()
        self._renderers.clear()
        self._env.close()


def tuple_quat(values: Any) -> tuple[float, float, float, float]:
    """A 4-element array as a float tuple."""
    return (float(values[0]), float(values[1]), float(values[2]), float(values[3]))
