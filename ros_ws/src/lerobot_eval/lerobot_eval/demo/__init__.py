"""The closed-loop demo (`make demo`, `lerobot-ros demo record|train|eval|report|all`).

Record demonstrations of the simulated SO-101 with the scripted expert and the recorder, train ACT on them,
deploy the policy with the policy node and the action executor against the sim bridge, and write a report.
Every stage keeps its results under one work folder (`DemoLayout`) and resumes from what is already there.
"""
