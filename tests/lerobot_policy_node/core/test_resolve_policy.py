"""`resolve_policy`: checkpoint spec + contract -> the loaded policy and its contract, as the policy node's configure
and `lerobot-ros eval` both resolve them (no ROS, no checkpoint: the scripted policy)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from lerobot_contract import ContractError
from lerobot_policy_node.core.errors import ObservationError, PolicyConfigError, PolicyLoadError
from lerobot_policy_node.core.policies import ScriptedPolicy
from lerobot_policy_node.core.resolve import resolve_policy

REPO = Path(__file__).resolve().parents[3]
SIM = REPO / "config" / "contracts" / "so101_sim.yaml"


def test_a_scripted_policy_takes_the_contracts_action_and_rate() -> None:
    policy, contract = resolve_policy("scripted", str(SIM))
    assert isinstance(policy, ScriptedPolicy)
    assert contract.source == str(SIM)
    action = contract.features["action"]
    assert policy.action_dim == action.size and tuple(policy.action_names or ()) == tuple(action.dataset_names or ())
    assert policy.fps == float(contract.fps)


def test_a_rate_in_the_spec_is_kept() -> None:
    policy, contract = resolve_policy("scripted:fps=10", SIM)
    assert policy.fps == 10.0 != float(contract.fps)


def test_without_a_contract_the_default_is_used_else_one_error_naming_where_to_set_it() -> None:
    _, contract = resolve_policy("scripted", "", default_contract=SIM)
    assert contract.source == str(SIM)
    with pytest.raises(PolicyConfigError, match=r"^parameter `contract` is empty and the checkpoint carries no"):
        resolve_policy("scripted", "")
    with pytest.raises(PolicyConfigError, match=r"^--contract is empty"):
        resolve_policy("scripted", "", contract_option="--contract")


def test_a_contract_without_action_cannot_drive_a_scripted_policy(tmp_path: Path) -> None:
    data = yaml.safe_load(SIM.read_text())
    del data["features"]["action"]
    path = tmp_path / "no_action.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ObservationError, match="declares no `action` feature"):
        resolve_policy("scripted", path)


def test_a_bad_contract_file_is_a_contract_error(tmp_path: Path) -> None:
    with pytest.raises(ContractError):
        resolve_policy("scripted", tmp_path / "missing.yaml")


def test_a_policy_server_only_where_the_caller_allows_one() -> None:
    # Without remote_timeout (lerobot-ros eval) a grpc:// spec is looked up as a checkpoint, which it is not.
    with pytest.raises(PolicyLoadError, match="neither a directory nor a Hub repo id"):
        resolve_policy("grpc://localhost:1", SIM)
