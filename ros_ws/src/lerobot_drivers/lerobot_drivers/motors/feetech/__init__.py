"""Feetech STS/SMS servos (STS3215 on SO-100/SO-101), protocol 0, on pyserial."""
