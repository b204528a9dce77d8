# The two commands of the README: `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
HOST ?= 127.0.0.1
PORT ?= 8000
# DEMO=false: the dashboard alone, without the demo fleet (gateway, services, traffic).
DEMO ?= true
DEMO_FLAGS := $(if $(filter false,$(DEMO)),,--demo)
# A production configuration (README: Configuration) for `check --deploy`: it must stay clean.
DEPLOY_ENV := DEBUG=false SECRET_KEY=deploy-check-only-0123456789-abcdefghijklmnopqrstuvwxyz \
	GRAYLANE_SECRET_KEYS=Z3JheWxhbmUtZGVwbG95LWNoZWNrLW9ubHkta2V5LTA= \
	ALLOWED_HOSTS=graylane.example.org SECURE_PROXY_SSL_HEADER=HTTP_X_FORWARDED_PROTO \
	SECURE_SSL_REDIRECT=true SECURE_HSTS_SECONDS=31536000 SECURE_HSTS_INCLUDE_SUBDOMAINS=true \
	SECURE_HSTS_PRELOAD=true

.PHONY: install run test test-fast lint bench

$(VENV)/.installed: requirements.txt requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -r requirements-dev.txt
	touch $@

# The engine's C primitives, built in place, and the gateway's request path compiled by mypyc
# into build/gateway/ (tools/build_speedups.py). Optional: where they do not build, one line
# says so and the engine and the gateway run as Python (the same decisions). Rebuilt when the
# sources change: the compiled gateway is used only while they are those it was built from.
build/.speedups-built: routing_engine/_speedups.c $(wildcard routing_engine/*.py) \
		$(wildcard dataplane/gateway/*.py) tools/build_speedups.py $(VENV)/.installed
	$(PY) tools/build_speedups.py
	mkdir -p build && touch $@

install: $(VENV)/.installed build/.speedups-built

# The dashboard and the demo fleet run under one supervisor (demo/fleet.py): Ctrl-C
# or SIGTERM stops every process it started.
run: install
	DEBUG=$${DEBUG:-true} $(PY) manage.py migrate --noinput
	DEBUG=$${DEBUG:-true} $(PY) manage.py demo_setup --url http://$(HOST):$(PORT)/ $(DEMO_FLAGS)
	DEBUG=$${DEBUG:-true} exec $(PY) -m demo.fleet --listen $(HOST):$(PORT) \
		$(if $(DEMO_FLAGS),,--no-demo)

# The Django checks need no database (CI's DATABASE_URL names one the test run creates).
lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports --no-cache
	$(VENV)/bin/mypy
	$(PY) tools/untyped_defs.py
	DATABASE_URL= DEBUG=true $(PY) manage.py check
	DATABASE_URL= DEBUG=true $(PY) manage.py makemigrations --check --dry-run
	DATABASE_URL= $(DEPLOY_ENV) $(PY) manage.py check --deploy --fail-level WARNING

# axe-core for the browser tests' accessibility check, exactly as package-lock.json pins it.
node_modules/.package-lock.json: package.json package-lock.json
	npm ci --no-audit --no-fund

# The slowest tests are listed at the end: where the suite's time goes, for whoever plans it.
test: lint node_modules/.package-lock.json
	$(VENV)/bin/pytest --durations=30

# The tests that start no process or server and drive no browser, on every core (pytest-xdist):
# under a minute here. The fuzzing (slow) is all that uses schemathesis and hypothesis, whose
# plugins would otherwise be imported by each worker, for seconds.
test-fast: install
	$(VENV)/bin/pytest -m "not slow and not browser" -n auto \
		-p no:schemathesis -p no:hypothesispytest --ignore=tests/test_api_fuzz.py

bench: install
	$(PY) bench/engine.py
	$(PY) bench/sync.py
	$(PY) bench/propagation.py
