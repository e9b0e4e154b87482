# Plain entry points. `make demo` and `make test` each set up .venv by themselves.
SHELL := /bin/bash
VENV := .venv
BIN := $(VENV)/bin
# sam build looks for python3.12 on PATH: the venv's interpreter is exactly that.
export PATH := $(CURDIR)/$(BIN):$(PATH)
export SAM_CLI_TELEMETRY := 0

.PHONY: setup demo test lint types unit-and-integration sam deploy bench soak node-bundle clean

# The local targets need a region, any one; `make deploy` takes yours (your profile's, or the
# AWS_DEFAULT_REGION you set), never this default, which would override a profile's region.
LOCAL_TARGETS := setup demo test lint types unit-and-integration sam bench soak node-bundle
$(LOCAL_TARGETS): export AWS_DEFAULT_REGION ?= us-east-1

setup:
	@bash scripts/setup.sh

## The main job: Lifeguard on a twin of a PCS cluster, each scenario against PCS alone (lifeguard demo),
## then the config lint.
demo: setup
	$(BIN)/lifeguard demo
	@echo
	@echo "=== The article's configurations, linted; then the invalid examples (exit 1 expected)"
	$(BIN)/lifeguard lint events/configs/article-*.json events/configs/update-request-*.json
	@$(BIN)/lifeguard lint events/configs/invalid-*.json; test $$? -eq 1

## Everything CI checks, in order of speed.
test: setup lint types unit-and-integration sam

lint:
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

types:
	$(BIN)/mypy
	@# Each function is its own top-level module `app`: one mypy run per function.
	for app in functions/*/app.py; do $(BIN)/mypy --strict "$$app" || exit 1; done

# One worker more than the cores (pytest-xdist), each taking work from the others once its own is done: the
# end-to-end tests wait on subprocesses and servers as much as they compute, and the longest (the 50-node wave,
# the twin demo) no longer leave one worker busy at the end. On 2 cores: 9 min 31 s against 13 min 26 s with
# one worker a core, in the same clone.
WORKERS ?= $(shell echo $$(( $$(nproc) + 1 )))
unit-and-integration:
	$(BIN)/pytest -q -n $(WORKERS) --dist worksteal --ignore=tests/artifact

## The stack: lint (cfn-lint's informational rules too), build both layers, checkov on the template as
## written, as built, and with its loops expanded (checkov does not know Fn::ForEach), then test what was built.
CHECKOV := .venv/checkov/bin/checkov --framework cloudformation --skip-download --compact --quiet -f
sam:
	$(BIN)/sam validate --lint
	$(BIN)/cfn-lint --include-checks I -- template.yaml
	$(BIN)/sam build
	$(BIN)/cfn-lint --include-checks I -- .aws-sam/build/template.yaml
	$(BIN)/python -m lifeguard_cli.template template.yaml .aws-sam/checkov/template.json
	$(CHECKOV) template.yaml
	$(CHECKOV) .aws-sam/build/template.yaml
	$(CHECKOV) .aws-sam/checkov/template.json
	$(BIN)/pytest -q tests/artifact

## Deploy to the account of your AWS credentials; --guided shows the answers kept in samconfig.toml.
deploy: setup
	$(BIN)/sam build
	$(BIN)/sam deploy --guided

bench: setup
	$(BIN)/python bench/bench_parsing.py
	$(BIN)/python bench/executor.py
	$(BIN)/python bench/shipper.py
	$(BIN)/python bench/ingest.py
	$(BIN)/python bench/loop.py
	$(BIN)/python bench/status.py
	$(BIN)/sam build
	$(BIN)/python bench/package.py
	$(BIN)/python bench/cold_start.py

## Hostile input through the four handlers, about 13,000 payloads (20-30 minutes); SCALE=0.1 for a tenth.
soak: setup
	$(BIN)/python bench/soak.py --scale $(or $(SCALE),1)

## The node bundle: dist/lifeguard-node.pyz (+ .sha256), for S3 and events/node/install-shipper.sh.
node-bundle: setup
	$(BIN)/python -m lifeguard_cli.node_bundle dist/lifeguard-node.pyz

clean:
	rm -rf .aws-sam dist .pytest_cache .mypy_cache .ruff_cache .hypothesis
