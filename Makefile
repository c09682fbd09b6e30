# s3sqs build and test entry points. `make help` lists them.

GO ?= go
FUNCTIONS := $(notdir $(wildcard functions/*))
BENCH ?= .

.PHONY: help demo test test-short vet build bench clean

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

demo: ## install and start the local AWS stand-ins and run the whole pipeline end to end
	tools/with-local-aws $(GO) run ./tools/demo

test: ## install and start the local AWS stand-ins, then vet and run every test with -race
	tools/with-local-aws sh -c '$(GO) vet ./... && $(GO) test -race -count=1 ./...'

test-short: ## run the tests that need no stand-ins
	$(GO) test -short -race ./...

vet: ## go vet
	$(GO) vet ./...

build: ## build a bootstrap for each Lambda function into dist/NAME/
	@for f in $(FUNCTIONS); do \
		echo "build dist/$$f/bootstrap"; \
		GOOS=linux GOARCH=arm64 CGO_ENABLED=0 $(GO) build -tags lambda.norpc -trimpath -ldflags='-s -w' -o dist/$$f/bootstrap ./functions/$$f || exit 1; \
	done

bench: ## run the benchmarks against the stand-ins (BENCH=regexp selects)
	tools/with-local-aws $(GO) test -run='^$$' -bench='$(BENCH)' -benchtime=1x ./...

clean: ## remove build output, installed stand-ins and logs
	rm -rf dist .local tools/localaws/node_modules
