"""Offline training of LeRobot policies on LeRobot v3 datasets (pure Python, no rclpy)."""
