"""The sim bridge says on /diagnostics how far its episode is behind the wall clock (episode_lag_s)."""

from __future__ import annotations

from tests.lerobot_sim_bridge.conftest import in_process_bridge


def test_diagnostics_carry_the_episodes_sim_and_wall_seconds_and_the_lag(ros_domain, monkeypatch):
    with in_process_bridge(ros_domain) as node:
        published = []
        monkeypatch.setattr(node._diagnostics, "publish", lambda status, **_: published.append(status))
        for _ in range(3):  # three steps of the episode (the gate is not waited on: the loop is not started)
            node._step_once()
        node._publish_diagnostics()
        values = {kv.key: float(kv.value) for kv in published[-1].values if kv.key.startswith("episode_")}
        assert values["episode_steps"] == 3
        assert abs(values["episode_sim_s"] - 3 / 30) < 1e-9
        # Lag is the episode's wall seconds minus its simulated seconds, both as reported.
        assert abs(values["episode_lag_s"] - (values["episode_wall_s"] - values["episode_sim_s"])) < 2e-3
