"""Teleoperation cores: leader -> follower mapping, joint jogging, gamepad axes and a small SO-101 IK."""
