"""Cameras: frame sources (OpenCV devices, video files, a synthetic pattern) and a newest-frame capture thread."""
