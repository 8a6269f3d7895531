"""Evaluation and the closed-loop demo: `lerobot-ros eval` and `lerobot-ros demo`, above the policy node, the sim
bridge, the recorder and training (it drives them; none of them imports it)."""
