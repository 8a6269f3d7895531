"""Policy types by name (`config.json`'s `type`)."""

from __future__ import annotations

from lerobot_training.errors import CheckpointError
from lerobot_training.policies.act import ACTPolicy
from lerobot_training.policies.base import Policy
from lerobot_training.policies.diffusion import DiffusionPolicy

POLICY_CLASSES: dict[str, type[Policy]] = {"act": ACTPolicy, "diffusion": DiffusionPolicy}


def policy_class(policy_type: object, where: str = "config.json") -> type[Policy]:
    """The class of `policy_type`; CheckpointError naming `where` and the known types otherwise."""
    if not isinstance(policy_type, str) or policy_type not in POLICY_CLASSES:
        raise CheckpointError(
            f"{where}: unknown policy type {policy_type!r}; this version knows {', '.join(sorted(POLICY_CLASSES))}"
        )
    return POLICY_CLASSES[policy_type]
