"""What generate_parameter_library and the lifecycle boilerplate give C++ nodes, for this project's rclpy nodes.

- `parameters`: a node's parameters as one frozen dataclass of `param()` fields (`ParameterTable`), pure;
- `ros`: `declare_parameters(node, Table)` declares them and keeps the config in step with runtime changes;
- `diagnostics`: `diagnostic_status()` and `DiagnosticsPublisher` for /diagnostics;
- `lifecycle`: `configure_transition()`, the one way a configure fails;
- `python -m lerobot_ros.node_kit`: the tables as Markdown, and the README sections checked against them.
"""
