"""Simulated Feetech and Dynamixel servo buses that speak the real byte protocol over a pseudo-terminal.

Used by the tests, the bench and the `fake_hardware:=true` launch option; the drivers cannot tell them
from an arm on a USB adapter.
"""
