# The project's commands. `make test` is what CI runs: it installs the
# stock tools the tests drive (natscli, nats-server as a reference,
# staticcheck, versitygw as the S3 server of the tiered storage tests, and
# curl and jq for the README quick start) and then runs
# every check.

GO        ?= go
GOBIN     := $(shell $(GO) env GOPATH)/bin
export PATH := $(GOBIN):$(PATH)

NATSCLI_VERSION     := v0.5.0
NATSSERVER_VERSION  := v2.15.2
STATICCHECK_VERSION := v0.8.2
VERSITYGW_VERSION   := v1.8.0
# Fuzz budgets are execution counts, not durations: Go 1.26's fuzz
# coordinator can report a spurious "context deadline exceeded" failure
# when a -fuzztime duration runs out (go.dev/issue/75804, fixed in Go
# 1.27). FUZZSCALE multiplies every budget; at 1 each target runs about
# 10-15 s on two cores. Minimizing new inputs is bounded the same way.
FUZZSCALE           ?= 1
FUZZMINIMIZE        ?= 2000x
fuzzn = $(shell echo $$(( $(1) * $(FUZZSCALE) )))x

.PHONY: test tools vet lint unit fuzz bench run

## test: everything CI checks
test: tools vet lint unit fuzz

## tools: the stock clients and reference server the tests use
tools:
	@$(GOBIN)/nats --version 2>/dev/null | grep -qx '$(NATSCLI_VERSION)' || $(GO) install github.com/nats-io/natscli/nats@$(NATSCLI_VERSION)
	@$(GOBIN)/nats-server --version 2>/dev/null | grep -q '$(NATSSERVER_VERSION)' || $(GO) install github.com/nats-io/nats-server/v2@$(NATSSERVER_VERSION)
	@$(GOBIN)/staticcheck -version 2>/dev/null | grep -q '$(STATICCHECK_VERSION:v%=%)' || $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	@$(GO) version -m $(GOBIN)/versitygw 2>/dev/null | grep -q 'mod.*github.com/versity/versitygw.*$(VERSITYGW_VERSION)' || $(GO) install github.com/versity/versitygw/cmd/versitygw@$(VERSITYGW_VERSION)
	@command -v curl >/dev/null && command -v jq >/dev/null || { apt-get update -qq && apt-get install -y -qq curl jq; } || \
		{ echo "install curl and jq (the README quick start and its test use them)"; exit 1; }

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

## bench: Contrail against nats-server with the same nats bench workloads
bench:
	$(GO) run ./bench

## run: the whole product on this machine (control plane and one node)
run:
	$(GO) run ./cmd/contrail dev
