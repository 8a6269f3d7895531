# The README's two commands are `make demo` (the main job) and `make test`.
.PHONY: setup test demo lint bench lock clean-shm reliability test-browser test-demo test-install docs test-full \
	test-plugins test-lerobot test-lerobot-044 test-user-install test-extended

setup:
	bash scripts/setup.sh

test:
	bash scripts/test.sh

# What `make test` skips, set up and run: the LeRobot reference environment, headless Chromium, the real
# launch_ros oracle (from ../shared), then the whole suite with every opt-in group of the targets below on.
test-full:
	bash scripts/test-full.sh $(ARGS)

demo:
	bash scripts/demo.sh $(ARGS)

lint:
	bash scripts/lint.sh

# The documentation site (docs/, mkdocs.yml) built with --strict into site/; open site/index.html.
docs:
	bash scripts/docs.sh

bench:
	bash scripts/bench.sh $(ARGS)

# Full reliability counts (fuzzing, kill -9 points, servo faults, disk full); prints the table, writes
# bench/results/reliability.json. The default `make test` runs only the quick subset.
reliability:
	bash scripts/reliability.sh $(ARGS)

# Rerun's web viewer (lerobot-ros view / dataset view --web) in headless Chromium, screenshots checked by colour
# (~1 min); needs Debian's chromium (scripts/setup.sh --with-browser). LEROBOT_ROS_UPDATE_DOCS=1 refreshes docs/.
test-browser:
	LEROBOT_ROS_BROWSER=1 .venv/bin/python -m pytest tests/lerobot_recorder/view tests/docs -m browser -q $(ARGS)

# LeRobot's own lerobot-record/-teleoperate/-replay and async inference (policy_server + robot_client) on the
# fake-hardware SO-101 through lerobot_plugins/ (sets up LeRobot's environment with the plugins first: ROS wheels on
# the first run, then seconds).
test-plugins:
	bash scripts/setup.sh --with-lerobot-plugins
	.venv/bin/python -m pytest tests/lerobot_plugins -q $(ARGS)

# Compatibility with the current LeRobot (0.6.1 on Python 3.12, in .venv-lerobot-ref, set up first with the plugins):
# datasets and checkpoints both ways, the policy server in LeRobot's environment, LeRobot's own lerobot-record,
# -teleoperate, -replay and async robot_client driving ROS robots through the plugins (every `reference` test).
test-lerobot:
	bash scripts/setup.sh --with-lerobot-plugins
	.venv/bin/python -m pytest -q -m reference $(ARGS)

# The older LeRobot the project stays compatible with, LeRobot 0.4.4 on Python 3.11 (the reference tests run 0.6.1):
# datasets both ways, ACT checkpoints both ways, lerobot-record/-replay through the plugins (sets up
# .venv-lerobot-044 first: ~1.5 GB on the first run, then seconds).
test-lerobot-044:
	bash scripts/setup.sh --with-lerobot-044
	LEROBOT_ROS_REFERENCE_VENV=$(CURDIR)/.venv-lerobot-044 \
	.venv/bin/python -m pytest -q -m reference $(ARGS) \
		tests/lerobot_recorder/dataset/test_dataset_lerobot_compat.py \
		tests/lerobot_training/test_training_lerobot_reference.py::test_lerobot_trained_act_checkpoint_loads_and_matches_lerobots_prediction \
		"tests/lerobot_training/test_training_lerobot_reference.py::test_lerobot_runs_a_checkpoint_trained_here_and_predicts_our_chunks[act]" \
		tests/lerobot_training/test_training_relative_actions.py::test_lerobot_0_4_refuses_a_relative_checkpoint_instead_of_running_offsets_as_targets \
		tests/lerobot_plugins/test_lerobot_scripts.py::test_record_then_replay

# The packages installed non-editable into a scratch venv (~40 s): contracts, robot configs and launch files come
# from the installed share/, not from this checkout.
test-install:
	LEROBOT_ROS_INSTALL_TEST=1 .venv/bin/python -m pytest tests/ros_ws/test_non_editable_install.py -q $(ARGS)

# Longer variants of what `make test` proves with quicker tests (fleet conversion faults, replays, more robots...).
test-extended:
	LEROBOT_ROS_EXTENDED=1 .venv/bin/python -m pytest -m extended -q $(ARGS)

# The tiny demo end to end with every stage resumed (five demo runs, 2-8 min; the default run has a quick one).
test-demo:
	LEROBOT_ROS_DEMO_E2E=1 .venv/bin/python -m pytest tests/lerobot_eval/test_demo_e2e.py -m demo_e2e -q $(ARGS)

# A new user's install: a scratch clone set up from plain PyPI (pip's configuration and wheel folders ignored) with
# Python 3.12, then the quick demo in it; prints setup time, download and venv size, the demo's result (~10 min).
test-user-install:
	bash scripts/test-user-install.sh $(ARGS)

# Freeze the resolved dependency set into requirements/constraints.txt.
lock:
	bash scripts/lock.sh

clean-shm:
	.venv/bin/lerobot-ros dds clean
