"""Dynamixel X-series servos (XL330/XL430 on the Koch arm), protocol 2.0, on pyserial."""
