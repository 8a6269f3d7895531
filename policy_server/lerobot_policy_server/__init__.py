"""A gRPC server for LeRobot policies and its client, with a typed, pickle-free wire format.

`protocol` (numpy only) defines the messages and their encoding; `service` serves a loaded policy;
`client` talks to a server; `backends` loads checkpoints (torch and LeRobot are imported only there).
Importing this package imports nothing heavy.
"""

__version__ = "0.1.0"
