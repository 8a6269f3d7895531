"""Drivers for LeRobot hardware on ROS 2.

Feetech and Dynamixel motor buses, SO-100/SO-101 and Koch arms, cameras and teleoperation.
"""
