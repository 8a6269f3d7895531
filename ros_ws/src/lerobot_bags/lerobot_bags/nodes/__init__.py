"""The ROS shell of bag playback (`lerobot-ros bag play`)."""
