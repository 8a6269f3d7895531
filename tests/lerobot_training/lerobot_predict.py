"""Runs in the LeRobot 0.4.4 reference venv: load a checkpoint directory with LeRobot's own
`from_pretrained` and `make_pre_post_processors`, and write the chunk it predicts for one observation.

Usage: python lerobot_predict.py CHECKPOINT_DIR OBSERVATION_NPZ OUT_NPZ SEED

Works for any policy type LeRobot knows. The global torch RNG is seeded with SEED right before the
prediction, so a sampling policy (diffusion) draws the same noise as the same seed does in lerobot_training.
For diffusion, the observation queue is filled the way `select_action` fills it.
"""

import json
import sys
from pathlib import Path

import numpy as np
import torch
from lerobot.policies.factory import get_policy_class, make_pre_post_processors


def main(checkpoint: str, observation_path: str, out_path: str, seed: str) -> None:
    policy_type = json.loads((Path(checkpoint) / "config.json").read_text())["type"]
    policy = get_policy_class(policy_type).from_pretrained(checkpoint)
    policy.eval()
    policy.reset()
    preprocessor, postprocessor = make_pre_post_processors(policy.config, pretrained_path=checkpoint)
    data = np.load(observation_path)
    observation = {key: torch.from_numpy(data[key]) for key in data.files}
    with torch.no_grad():
        batch = {key: value for key, value in preprocessor(observation).items() if value is not None}
        if policy_type == "diffusion":
            from lerobot.policies.utils import populate_queues
            from lerobot.utils.constants import OBS_IMAGES

            if policy.config.image_features:
                batch = dict(batch)
                batch[OBS_IMAGES] = torch.stack([batch[key] for key in policy.config.image_features], dim=-4)
            policy._queues = populate_queues(policy._queues, batch)
        torch.manual_seed(int(seed))
        chunk = postprocessor(policy.predict_action_chunk(batch))
    np.savez(out_path, chunk=chunk[0].numpy())


if __name__ == "__main__":
    main(*sys.argv[1:5])
