"""Motor buses (Feetech STS/SCS, Dynamixel protocol 2.0), their control tables and LeRobot calibration.

Nothing here imports rclpy: buses take and return plain integers, calibration maps ticks to radians.
"""
