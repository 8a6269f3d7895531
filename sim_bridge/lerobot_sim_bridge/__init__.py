"""Gymnasium environments bridged to ROS 2 topics."""
