"""Scripted experts: pure policies that act like a teleoperator, turning observations into joint targets."""
