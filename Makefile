# The README's two commands are `make demo` (the main job) and `make test`.
.PHONY: setup test demo lint bench lock clean-shm

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

# Freeze the resolved dependency set into requirements/constraints.txt.
lock:
	bash scripts/lock.sh

clean-shm:
	.venv/bin/lerobot-ros dds clean
