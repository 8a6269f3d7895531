"""Checkpoint + contract -> a loaded policy and the contract it runs on (the policy node's configure and
`lerobot-ros eval` both call `resolve_policy`).

The policy is a checkpoint directory or Hub repo (`CheckpointPolicy`), a policy server (`grpc://host:port`,
`RemotePolicy`, where the caller allows one) or the deterministic test policy (`scripted[:options]`). The
contract is the one given, else the checkpoint's own contract.yaml, else `default_contract`.
"""

from __future__ import annotations

from pathlib import Path

from lerobot_contract import Contract
from lerobot_policy_node.core.errors import ObservationError, PolicyConfigError
from lerobot_policy_node.core.policies import (
    REMOTE_SCHEME,
    SCRIPTED,
    CheckpointPolicy,
    ChunkPolicy,
    RemoteAccess,
    RemotePolicy,
    parse_scripted,
    resolve_checkpoint,
)


def resolve_policy(
    checkpoint: str,
    contract: str | Path = "",
    *,
    device: str = "cpu",
    remote_timeout: float | None = None,
    image_encoding: str = "raw",
    jpeg_quality: int = 90,
    remote_access: RemoteAccess | None = None,
    default_contract: Path | None = None,
    contract_option: str = "parameter `contract`",
) -> tuple[ChunkPolicy, Contract]:
    """The loaded policy and its contract.

    `remote_timeout` None: a `grpc://` spec is not accepted as a policy server (it is looked up as a checkpoint,
    which fails with PolicyLoadError). `contract_option` names where the contract is set, for the error raised
    when there is none. `image_encoding` / `jpeg_quality`: how a policy server gets camera images;
    `remote_access`: the token and TLS files it asks for. Raises
    PolicyLoadError (checkpoint), ContractError (contract file), PolicyConfigError (no contract, or an image
    encoding the server does not decode) or ObservationError (a scripted policy on a contract without `action`).
    """
    loaded: CheckpointPolicy | RemotePolicy | None = None
    if remote_timeout is not None and checkpoint.startswith(REMOTE_SCHEME):
        loaded = RemotePolicy(
            checkpoint,
            float(remote_timeout),
            name=checkpoint,
            image_encoding=image_encoding,
            jpeg_quality=jpeg_quality,
            access=remote_access,
        )
    elif checkpoint.split(":", 1)[0] != SCRIPTED:
        loaded = CheckpointPolicy(resolve_checkpoint(checkpoint), device, name=checkpoint)
    if str(contract):
        resolved = Contract.load(contract)
    elif loaded is not None and loaded.contract is not None:
        resolved = Contract.from_dict(loaded.contract, source=f"{checkpoint}/contract.yaml")
    elif default_contract is not None:
        resolved = Contract.load(default_contract)
    else:
        raise PolicyConfigError(f"{contract_option} is empty and the checkpoint carries no contract.yaml; set it")
    if loaded is not None:
        return loaded, resolved
    action = resolved.features.get("action")
    if action is None:
        raise ObservationError(f"contract {resolved.source} declares no `action` feature")
    policy = parse_scripted(checkpoint, action.size, tuple(action.dataset_names or ()))
    if checkpoint == SCRIPTED or "fps=" not in checkpoint:
        policy.fps = float(resolved.fps)
    return policy, resolved
