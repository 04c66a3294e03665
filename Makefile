# The project's commands. `make test` is what CI runs: it installs the
# stock tools the tests drive (natscli, nats-server as a reference,
# staticcheck, terraform for the provider's acceptance tests, versitygw as
# the S3 server of the tiered storage tests, curl and jq for the README
# quick start, and chromium for the console's browser tests) and then runs
# every check.

GO        ?= go
GOBIN     := $(shell $(GO) env GOPATH)/bin
export PATH := $(GOBIN):$(PATH)

NATSCLI_VERSION     := v0.5.0
NATSSERVER_VERSION  := v2.15.2
STATICCHECK_VERSION := v0.8.2
# The Terraform provider's acceptance tests drive a real terraform (the
# last MPL release); building it takes a few minutes, once.
TERRAFORM_VERSION   := v1.5.7
VERSITYGW_VERSION   := v1.8.0
# Fuzz budgets are execution counts, not durations: Go 1.26's fuzz
# coordinator can report a spurious "context deadline exceeded" failure
# when a -fuzztime duration runs out (go.dev/issue/75804, fixed in Go
# 1.27). FUZZSCALE multiplies every budget; at 1 each target runs about
# 10-15 s on two cores. Minimizing new inputs is bounded the same way.
FUZZSCALE           ?= 1
FUZZMINIMIZE        ?= 2000x
fuzzn = $(shell echo $$(( $(1) * $(FUZZSCALE) )))x

.PHONY: test tools vet lint unit fuzz bench run web-vendor terraform-provider

## test: everything CI checks
test: tools vet lint unit fuzz

## tools: the stock clients and reference server the tests use
tools:
	@$(GOBIN)/nats --version 2>/dev/null | grep -qx '$(NATSCLI_VERSION)' || $(GO) install github.com/nats-io/natscli/nats@$(NATSCLI_VERSION)
	@$(GOBIN)/nats-server --version 2>/dev/null | grep -q '$(NATSSERVER_VERSION)' || $(GO) install github.com/nats-io/nats-server/v2@$(NATSSERVER_VERSION)
	@$(GOBIN)/staticcheck -version 2>/dev/null | grep -q '$(STATICCHECK_VERSION:v%=%)' || $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	@CHECKPOINT_DISABLE=1 TF_CLI_CONFIG_FILE=/dev/null $(GOBIN)/terraform version 2>/dev/null | head -1 | grep -qx 'Terraform $(TERRAFORM_VERSION)' || $(GO) install github.com/hashicorp/terraform@$(TERRAFORM_VERSION)
	@$(GO) version -m $(GOBIN)/versitygw 2>/dev/null | grep -q 'mod.*github.com/versity/versitygw.*$(VERSITYGW_VERSION)' || $(GO) install github.com/versity/versitygw/cmd/versitygw@$(VERSITYGW_VERSION)
	@command -v curl >/dev/null && command -v jq >/dev/null || { apt-get update -qq && apt-get install -y -qq curl jq; } || \
		{ echo "install curl and jq (the README quick start and its test use them)"; exit 1; }
	@command -v chromium >/dev/null || { apt-get update -qq && apt-get install -y -qq chromium; } || \
		{ echo "install chromium (the console's browser tests drive it headless)"; exit 1; }

vet:
	@unformatted=$$(gofmt -l .); if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...

lint:
	staticcheck ./...

# One package at a time: the cluster e2e tests run three race-built nodes
# each, and sharing two cores with other packages' tests makes their raft
# timing, not their behaviour, what they measure.
unit:
	$(GO) test -race -count=1 -p 1 -timeout 30m ./...

## fuzz: a short run of every fuzz target, on top of the checked-in corpus
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(call fuzzn,800000) -fuzzminimizetime $(FUZZMINIMIZE) ./dataplane/protocol
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(call fuzzn,600000) -fuzzminimizetime $(FUZZMINIMIZE) ./dataplane/config/conf
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(call fuzzn,250000) -fuzzminimizetime $(FUZZMINIMIZE) ./dataplane/config
	$(GO) test -run '^$$' -fuzz '^FuzzTransform$$' -fuzztime $(call fuzzn,600000) -fuzzminimizetime $(FUZZMINIMIZE) ./dataplane/subject
	$(GO) test -run '^$$' -fuzz '^FuzzConnect$$' -fuzztime $(call fuzzn,100000) -fuzzminimizetime $(FUZZMINIMIZE) ./dataplane/server
	$(GO) test -run '^$$' -fuzz '^FuzzRoute$$' -fuzztime $(call fuzzn,100000) -fuzzminimizetime $(FUZZMINIMIZE) ./dataplane/server
	$(GO) test -run '^$$' -fuzz '^FuzzJWT$$' -fuzztime $(call fuzzn,300000) -fuzzminimizetime $(FUZZMINIMIZE) ./tenant
	$(GO) test -run '^$$' -fuzz '^FuzzAPI$$' -fuzztime $(call fuzzn,30000) -fuzzminimizetime $(FUZZMINIMIZE) ./dataplane/jetstream

## web-vendor: check the console's vendored libraries against their npm
## packages (needs npm; builds and CI never run it). To upgrade one, change
## its version here, run `make web-vendor UPDATE=1`, and review the diff.
HTM_VERSION   := 3.1.1
UPLOT_VERSION := 1.6.32
web-vendor:
	@set -e; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; cd "$$tmp"; \
	npm pack --silent htm@$(HTM_VERSION) uplot@$(UPLOT_VERSION) >/dev/null; \
	mkdir htm uplot; tar xzf htm-$(HTM_VERSION).tgz -C htm; tar xzf uplot-$(UPLOT_VERSION).tgz -C uplot; \
	cp htm/package/preact/standalone.module.js htm-preact-standalone.module.js; \
	cp uplot/package/dist/uPlot.esm.js uplot/package/dist/uPlot.min.css .; \
	if [ -n "$(UPDATE)" ]; then \
		cp htm-preact-standalone.module.js uPlot.esm.js uPlot.min.css $(CURDIR)/web/vendor/; \
		cp htm/package/LICENSE $(CURDIR)/web/vendor/htm.LICENSE; cp uplot/package/LICENSE $(CURDIR)/web/vendor/uPlot.LICENSE; \
		sha256sum htm-preact-standalone.module.js uPlot.esm.js uPlot.min.css > $(CURDIR)/web/vendor/SHA256SUMS; \
	fi; \
	sha256sum -c $(CURDIR)/web/vendor/SHA256SUMS

## bench: Contrail against nats-server with the same nats bench workloads
bench:
	$(GO) run ./bench

## terraform-provider: build terraform-provider-contrail into ./bin
terraform-provider:
	$(GO) build -o bin/terraform-provider-contrail ./terraform/cmd/terraform-provider-contrail

## run: the whole product on this machine (control plane and one node)
run:
	$(GO) run ./cmd/contrail dev
