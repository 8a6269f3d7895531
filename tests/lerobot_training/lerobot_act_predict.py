"""Runs in the LeRobot 0.4.4 reference venv: load a LeRobot ACT checkpoint with LeRobot's own code and
write the chunk it predicts for the observation in an .npz (the training tests compare ours with it).

Usage: python lerobot_act_predict.py CHECKPOINT_DIR OBSERVATION_NPZ OUT_NPZ
"""

import sys

import numpy as np
import torch
from lerobot.policies.act.modeling_act import ACTPolicy
from lerobot.policies.factory import make_pre_post_processors


def main(checkpoint: str, observation_path: str, out_path: str) -> None:
    policy = ACTPolicy.from_pretrained(checkpoint)
    policy.eval()
    preprocessor, postprocessor = make_pre_post_processors(policy.config, pretrained_path=checkpoint)
    data = np.load(observation_path)
    observation = {key: torch.from_numpy(data[key]) for key in data.files}
    with torch.no_grad():
        batch = preprocessor(observation)
        chunk = postprocessor(policy.predict_action_chunk(batch))
    np.savez(out_path, chunk=chunk[0].numpy())


if __name__ == "__main__":
    main(*sys.argv[1:4])
