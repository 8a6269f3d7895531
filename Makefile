# The README's two commands are `make demo` (the main job) and `make test`.
.PHONY: setup test demo lint bench lock clean-shm reliability

setup:
	bash scripts/setup.sh

test:
	bash scripts/test.sh

demo:
	bash scripts/demo.sh $(ARGS)

lint:
	bash scripts/lint.sh

bench:
	bash scripts/bench.sh $(ARGS)

# Full reliability counts (fuzzing, kill -9 points, servo faults, disk full); prints the table, writes
# bench/results/reliability.json. The default `make test` runs only the quick subset.
reliability:
	bash scripts/reliability.sh $(ARGS)

# Freeze the resolved dependency set into requirements/constraints.txt.
lock:
	bash scripts/lock.sh

clean-shm:
	.venv/bin/lerobot-ros dds clean
