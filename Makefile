# The two commands of the README: `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: install run test lint bench

$(VENV)/.installed: requirements.txt requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -r requirements-dev.txt
	touch $@

install: $(VENV)/.installed

run: install
	DEBUG=$${DEBUG:-true} $(PY) manage.py migrate --noinput
	DEBUG=$${DEBUG:-true} $(PY) manage.py demo_setup --url http://$(HOST):$(PORT)/
	DEBUG=$${DEBUG:-true} $(PY) -m uvicorn --host $(HOST) --port $(PORT) --lifespan off \
		--timeout-graceful-shutdown 5 graylane.asgi:application

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	SECRET_KEY=lint $(PY) manage.py makemigrations --check --dry-run

test: lint
	$(VENV)/bin/pytest

bench: install
	$(PY) bench/engine.py
	$(PY) bench/sync.py
	$(PY) bench/propagation.py
