# s3sqs build and test entry points. `make help` lists them.

GO ?= go
FUNCTIONS := $(notdir $(wildcard functions/*))
BENCH ?= .

# infra/ (the CDK app, its own Go module) runs with these so that the CDK
# CLI and the jsii runtime stay offline (no telemetry, notices or version
# checks) and keep their caches under .local/, not in the real home. HOME
# moves too, so Go's own settings are passed on explicitly.
CDK_HOME_DIR := $(CURDIR)/.local/cdk-home
INFRA_ENV := CDK_DISABLE_CLI_TELEMETRY=true CDK_DISABLE_VERSION_CHECK=1 \
	AWS_EC2_METADATA_DISABLED=true NPM_CONFIG_UPDATE_NOTIFIER=false \
	CDK_HOME=$(CDK_HOME_DIR) HOME=$(CDK_HOME_DIR) \
	JSII_RUNTIME_PACKAGE_CACHE_ROOT=$(CDK_HOME_DIR)/jsii \
	JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20 \
	GOENV=$(shell $(GO) env GOENV) GOPATH=$(shell $(GO) env GOPATH) \
	GOCACHE=$(shell $(GO) env GOCACHE) GOMODCACHE=$(shell $(GO) env GOMODCACHE)
# npm ci of the pinned CDK CLI (infra/_cdk-cli/package-lock.json) leaves
# this stamp. It lives in _cdk-cli so that `go test ./...` in infra/ skips it.
CDK_CLI_DIR := infra/_cdk-cli
CDK_CLI := $(CDK_CLI_DIR)/node_modules/.s3sqs-installed
# test-infra synthesizes with placeholder bootstraps (the template does not
# depend on the binaries); `make synth` uses the real ones from `make build`.
SYNTH_CODE := .local/infra-synth-code
SYNTH_OUT := .local/cdk.out
# datasets=none: a parity set that names no dataset synthesizes fanout
# reading none (a set's own datasets context comes later and wins).
SYNTH_CTX = -c s3ingestCodeDir=$(CURDIR)/$(SYNTH_CODE)/s3ingest -c fanoutCodeDir=$(CURDIR)/$(SYNTH_CODE)/fanout -c datasets=none
# The parameter sets at which template.yaml is compared with the CDK stack
# (tools/samparity/sets.json): test-infra synthesizes each non-default set
# into $(SYNTH_SETS_OUT)/<name>/ with the set's context.
PARITY := python3 tools/samparity/parity.py
PARITY_SETS := tools/samparity/sets.json
SYNTH_SETS_OUT := .local/cdk.out-sets

# How a function is built for Lambda: provided.al2023 on arm64.
LAMBDA_BUILD := GOOS=linux GOARCH=arm64 CGO_ENABLED=0 $(GO) build -tags lambda.norpc -trimpath -ldflags='-s -w'

.PHONY: help demo backfill chaos simulate test test-short check-links test-infra test-sam build-S3IngestFunction build-FanoutFunction cdk-cli deploy synth vet install build bench bench-latency bench-go planbench membench plot clean

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

demo: ## install and start the local AWS stand-ins and run the whole pipeline end to end
	tools/with-local-aws $(GO) run ./tools/demo

backfill: ## install and start the local AWS stand-ins and run a paced backfill over two functions: preview, start, status -watch, pause, resume, set -max-rate (docs/backfills.md)
	tools/with-local-aws $(GO) run ./tools/backfill $(BACKFILL_ARGS)

chaos: ## run both functions through a fault-injecting proxy (with and without claims) and print how every record ended
	tools/with-local-aws $(GO) run ./tools/chaos $(CHAOS_ARGS)

SEEDS ?= 2000
simulate: ## run SEEDS generated scenarios (default 2000) through the engine against in-process S3/SQS models with faults, and check each (SEED=n replays one; OFF=class,... turns classes off)
	$(GO) test -count=1 -timeout 60m -run 'TestSimulate$$' ./internal/testenv/simulate -v -seeds=$(SEEDS) $(if $(SEED),-seed=$(SEED)) $(if $(OFF),-off=$(OFF))

# The memory tests send a million entries: under -race they skip, and run
# again without it.
MEMORY_TESTS := TestKeptHeap
test: ## install and start the local AWS stand-ins, then vet and run every test with -race (the memory tests without it); then test-infra
	tools/with-local-aws sh -c '$(GO) vet ./... && $(GO) test -race -count=1 -timeout 20m ./... && $(GO) test -count=1 -run '"'"'$(MEMORY_TESTS)'"'"' -v ./pkg/engine'
	$(MAKE) --no-print-directory test-infra

test-infra: $(CDK_CLI) ## vet and test the CDK app in infra/, cdk synth it offline (cdk-nag included) at each parity set, cfn-lint, then test-sam
	@command -v cfn-lint >/dev/null || { echo "cfn-lint is not on PATH (install Python cfn-lint 1.51.0: pipx install cfn-lint==1.51.0; docs/local-stand-ins.md#what-you-need)" >&2; exit 1; }
	mkdir -p $(CDK_HOME_DIR) $(SYNTH_CODE)/s3ingest $(SYNTH_CODE)/fanout
	cd infra && $(INFRA_ENV) $(GO) vet ./... && $(INFRA_ENV) $(GO) test -count=1 ./...
	printf 'placeholder\n' >$(SYNTH_CODE)/s3ingest/bootstrap
	printf 'placeholder\n' >$(SYNTH_CODE)/fanout/bootstrap
	rm -rf $(SYNTH_OUT) $(SYNTH_SETS_OUT)
	cd infra && $(INFRA_ENV) _cdk-cli/node_modules/.bin/cdk synth -q --no-notices -o $(CURDIR)/$(SYNTH_OUT) $(SYNTH_CTX)
	@for set in $$($(PARITY) --list-sets $(PARITY_SETS)); do \
		ctx=$$($(PARITY) --context $(PARITY_SETS) $$set) || exit 1; \
		echo "cdk synth (parity set $$set) $$ctx"; \
		(cd infra && $(INFRA_ENV) _cdk-cli/node_modules/.bin/cdk synth -q --no-notices -o $(CURDIR)/$(SYNTH_SETS_OUT)/$$set $(SYNTH_CTX) $$ctx) || exit 1; \
	done
	cfn-lint --ignore-checks W3005 -- $(SYNTH_OUT)/*.template.json $(SYNTH_SETS_OUT)/*/*.template.json
	$(MAKE) --no-print-directory test-sam

test-sam: ## cfn-lint template.yaml (SAM transform offline) and check its parity with the synthesized CDK stack at each parameter set
	@test -f $(SYNTH_OUT)/S3Sqs.template.json || { echo "no $(SYNTH_OUT)/S3Sqs.template.json: run make test-infra" >&2; exit 1; }
	cfn-lint -- template.yaml
	$(PARITY) --sets $(PARITY_SETS) --cdk $(SYNTH_OUT) --cdk-sets $(SYNTH_SETS_OUT) template.yaml
	$(PARITY) --selftest --sets $(PARITY_SETS) --cdk $(SYNTH_OUT) --cdk-sets $(SYNTH_SETS_OUT) template.yaml

synth: build $(CDK_CLI) ## cdk synth infra/ offline with the built functions, into infra/cdk.out (CDK_ARGS='-c key=value ...')
	mkdir -p $(CDK_HOME_DIR)
	cd infra && $(INFRA_ENV) _cdk-cli/node_modules/.bin/cdk synth -q --no-notices $(CDK_ARGS)
	cfn-lint --ignore-checks W3005 -- infra/cdk.out/*.template.json

cdk-cli: $(CDK_CLI) ## install the pinned CDK CLI into infra/_cdk-cli/node_modules (npm ci); cdk is then infra/_cdk-cli/node_modules/.bin/cdk

deploy: build $(CDK_CLI) ## build the functions and cdk deploy infra/ (CDK_ARGS='-c datasets=BUCKET[/PREFIX],... -c key=value ...'; AWS credentials of the target account)
	mkdir -p $(CDK_HOME_DIR)
	cd infra && $(INFRA_ENV) _cdk-cli/node_modules/.bin/cdk deploy $(CDK_ARGS)

$(CDK_CLI): $(CDK_CLI_DIR)/package.json $(CDK_CLI_DIR)/package-lock.json
	cd $(CDK_CLI_DIR) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

test-short: ## run the tests that need no stand-ins
	$(GO) test -short -race ./...

check-links: ## check the links and #anchors of README.md and the Markdown files under docs/
	$(GO) test -run TestDocLinks ./internal/testenv/doccheck/

vet: ## go vet
	$(GO) vet ./...

install: ## install the s3sqs CLI into $(go env GOPATH)/bin (go install ./cmd/s3sqs)
	$(GO) install ./cmd/s3sqs

build: ## build a bootstrap for each Lambda function into dist/NAME/
	@for f in $(FUNCTIONS); do \
		echo "build dist/$$f/bootstrap"; \
		$(LAMBDA_BUILD) -o dist/$$f/bootstrap ./functions/$$f || exit 1; \
	done

# sam build (BuildMethod: makefile) runs these with ARTIFACTS_DIR set;
# without it they would write /bootstrap at the root of the filesystem.
build-S3IngestFunction build-FanoutFunction: require-artifacts-dir

.PHONY: require-artifacts-dir
require-artifacts-dir:
	@test -n "$(ARTIFACTS_DIR)" || { echo "ARTIFACTS_DIR is not set: sam build sets it; by hand, run make $(MAKECMDGOALS) ARTIFACTS_DIR=DIR (or make build for dist/)" >&2; exit 2; }

build-S3IngestFunction:
	$(LAMBDA_BUILD) -o $(ARTIFACTS_DIR)/bootstrap ./functions/s3ingest

build-FanoutFunction:
	$(LAMBDA_BUILD) -o $(ARTIFACTS_DIR)/bootstrap ./functions/fanout

bench: ## print the table of CPU per record and records/s of each path (BENCH_ARGS='-records 200000')
	tools/with-local-aws $(GO) run ./tools/bench $(BENCH_ARGS)

bench-latency: ## print records/s and peak RSS of fanout (record, chunk) and s3ingest at 0, 20 and 50 ms added to every S3 and SQS request, defaults vs a hand-tuned sweep (BENCH_LATENCY_ARGS='-shape small', '-records 500 -sweep ""', '-bin OTHER_CLI'); several minutes, not part of make test
	tools/with-local-aws $(GO) run ./tools/latencybench $(BENCH_LATENCY_ARGS)

planbench: ## plan a listing of 1,000,000 keys (and 100,000 CSV keys) through fanout under aws-lambda-rie in 10 s invocations (PLANBENCH_ARGS='-keys 200000')
	tools/with-local-aws $(GO) run ./tools/planbench $(PLANBENCH_ARGS)

membench: ## print the peak RSS and records/s of the fanout bootstrap sending a 1 GiB object in each mode (MEMBENCH_ARGS='-cases "chunk chunk/cc=8"'); a few minutes, not part of make test
	tools/with-local-aws $(GO) run ./tools/membench $(MEMBENCH_ARGS)

bench-go: ## run the Go benchmarks against the stand-ins (BENCH=regexp selects)
	tools/with-local-aws $(GO) test -run='^$$' -bench='$(BENCH)' -benchtime=1x ./...

plot: ## run the throughput benchmark on this machine and draw docs/throughput.svg (gonum/plot)
	tools/with-local-aws $(GO) run ./tools/throughput -out docs/throughput.json
	cd tools/plot && $(GO) run . -in ../../docs/throughput.json -out ../../docs/throughput.svg

clean: ## remove build output, installed stand-ins and logs
	rm -rf dist .local tools/localaws/node_modules $(CDK_CLI_DIR)/node_modules infra/cdk.out
