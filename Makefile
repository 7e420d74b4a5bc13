# Copyright The otelomni Authors
# SPDX-License-Identifier: Apache-2.0

# otelomni: the two commands are `make demo` and `make test`.
#
# Everything a target needs is fetched by the target itself (Go modules from
# the module proxy; Jaeger built from tools/, the tier's collector from
# tools/otelcol/), so both work on a fresh clone.

GO          ?= go
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
JAEGER      := tools/bin/jaeger
OTELCOL     := tools/bin/otelcol
BENCHCOUNT  ?= 5
# Every package of every module of the workspace (go.work): a ./... pattern
# stops at a module's edge.
PKGS        := github.com/otelomni/otelomni/...

.PHONY: demo test lint vet staticcheck unit fuzz bench import-bench load jaeger fleet jaeger-bin otelcol-bin prometheus-bin chromium-bin sizing clean

## demo: a simulated pipeline instrumented end to end; needs no server.
## Then a request that kills its engine (SIGKILL, mid-request) and the
## waterfall the engine's crash journal recovers at its restart.
demo:
	$(GO) run ./examples/diffusion
	$(GO) run ./examples/diffusion -crash -requests 8

## test: vet, staticcheck, every test under the race detector, and bounded
## fuzz runs of the record parser, the import's readers of every form and
## its merge of several forms of one request, the import's span ids (one
## id, one time), the import's spans against
## the record path's, the OTLP/JSON reader, the trace-tree builders and the
## table, diff's critical path and comparison, the string bounding, the
## import's OTLP requests, the crash journal's recovery, decoder and cut
## of strings, and otelsetup's reading of every environment variable.
test: lint unit fuzz

lint: vet staticcheck
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi

vet:
	$(GO) vet $(PKGS)

staticcheck:
	$(GO) run $(STATICCHECK) $(PKGS)

# The end-to-end tests need Jaeger, and the fleet tests the tier's
# collector; OTELOMNI_REQUIRE_JAEGER makes them fail, not skip, if either is
# missing.
unit: $(JAEGER) $(OTELCOL) prometheus-bin chromium-bin
	OTELOMNI_REQUIRE_JAEGER=1 $(GO) test -race -count=1 -timeout 30m $(PKGS)

# Each fuzz target runs FUZZTIME executions; go test fuzzes one target at a
# time. A count, not a duration: it does the same work on a busy machine as
# on an idle one, and Go 1.26's fuzz coordinator can fail a target whose
# duration ends mid-execution with a bare "context deadline exceeded"
# (go.dev/issue/75804). 4000 executions take from under a second to about
# 15 s a target on 2 cores.
FUZZTIME ?= 4000x

fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) ./omnitrace/internal/omnirecord/input
	$(GO) test -run '^$$' -fuzz '^FuzzInput$$' -fuzztime $(FUZZTIME) ./omnitrace/internal/omnirecord/input
	$(GO) test -run '^$$' -fuzz '^FuzzMergeForms$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 5s ./omnitrace/internal/omnirecord/input
	$(GO) test -run '^$$' -fuzz '^FuzzNoSpanIDHasTwoTimes$$' -fuzztime $(FUZZTIME) ./omnitrace/internal/omnirecord/input
	$(GO) test -run '^$$' -fuzz '^FuzzEmitMatchesTheRecordPath$$' -fuzztime $(FUZZTIME) ./omnitrace/internal/omnirecord/emit
	$(GO) test -run '^$$' -fuzz '^FuzzReadOTLPJSON$$' -fuzztime $(FUZZTIME) ./omnitrace/traceview
	$(GO) test -run '^$$' -fuzz '^FuzzTrees$$' -fuzztime $(FUZZTIME) ./omnitrace/traceview
	$(GO) test -run '^$$' -fuzz '^FuzzTable$$' -fuzztime $(FUZZTIME) ./omnitrace/internal/tracetable
	$(GO) test -run '^$$' -fuzz '^FuzzCriticalPath$$' -fuzztime $(FUZZTIME) ./omnitrace/internal/critpath
	$(GO) test -run '^$$' -fuzz '^FuzzCompare$$' -fuzztime $(FUZZTIME) ./omnitrace/internal/tracediff
	$(GO) test -run '^$$' -fuzz '^FuzzString$$' -fuzztime $(FUZZTIME) ./internal/sanitize
	$(GO) test -run '^$$' -fuzz '^FuzzOTLPSink$$' -fuzztime $(FUZZTIME) ./omnitrace
	$(GO) test -run '^$$' -fuzz '^FuzzRecover$$' -fuzztime $(FUZZTIME) ./otelsetup/internal/journal
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME) ./otelsetup/internal/journal
	$(GO) test -run '^$$' -fuzz '^FuzzKeptIsWhatTheExporterSends$$' -fuzztime $(FUZZTIME) ./otelsetup/internal/journal
	$(GO) test -run '^$$' -fuzz '^FuzzEnvironmentValue$$' -fuzztime $(FUZZTIME) ./otelsetup

## bench: otelomni's live path against the same spans and measurements
## written by hand, on every path, and the crash journal against the same
## path without it: BENCHROUNDS rounds, each running every sub-benchmark
## once (docs/performance.md). Not part of make test.
BENCHROUNDS ?= 16
BENCHTIME   ?= 0.5s
bench:
	$(GO) run ./testbed/cmd/benchratio -rounds $(BENCHROUNDS) -benchtime $(BENCHTIME) -go $(GO)

## import-bench: what `omnitrace import` costs against a bare JSON decode
## of the same lines, side by side, with peak memory (docs/omnitrace.md).
IMPORTN ?= 100000
import-bench:
	$(GO) run ./testbed/cmd/importbench -n $(IMPORTN) -rounds $(BENCHCOUNT)

## load: drive the demo's engine at RATE requests/s for DURATION into a real
## Jaeger and account for every span (docs/reliability.md).
RATE     ?= 3000
DURATION ?= 60s
load: $(JAEGER)
	$(GO) run ./testbed/cmd/load -rate $(RATE) -duration $(DURATION)

## jaeger: build Jaeger once, start it on loopback, run the demo into it,
## read every trace back from its API and print it. KEEP=1 keeps it running.
jaeger: $(JAEGER)
	$(GO) run ./testbed/cmd/jaegerdemo $(if $(KEEP),-keep)

## fleet: the collector tier of deploy/ on loopback: a backend Jaeger
## (Badger in a temporary folder), the tail-sampling collector
## (tools/bin/otelcol), replicas of the multi-stage example sending normal,
## slow, saturated and failing requests; prints what was kept and dropped
## (docs/fleet.md). KEEP=1 keeps it running.
fleet: $(JAEGER) $(OTELCOL) prometheus-bin
	$(GO) run ./testbed/cmd/fleet $(if $(KEEP),-keep)

## otelcol-bin: build the tier's collector, upstream components at v0.161.0
## (tools/otelcol, a module of its own), into tools/bin/otelcol.
otelcol-bin: $(OTELCOL)

$(OTELCOL): tools/otelcol/go.mod tools/otelcol/go.sum tools/otelcol/main.go
	cd tools/otelcol && GOWORK=off $(GO) build -o ../bin/otelcol .

## prometheus-bin: install Debian's Prometheus server (2.42; the package
## does not start it), which the exemplar tests and `make fleet` run on
## loopback with exemplar storage on. Needs root, as apt-get does.
prometheus-bin:
	@command -v prometheus >/dev/null || { DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends prometheus || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends prometheus; }; }
	@prometheus --version 2>&1 | head -1

## chromium-bin: install Debian's Chromium, which the test of `omnitrace
## diff -html` opens the report in, headless, with a fresh profile and no
## network. Needs root, as apt-get does.
chromium-bin:
	@command -v chromium >/dev/null || { DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium; }; }
	@chromium --version 2>&1 | head -1

## sizing: the measured memory of the tail-sampling decision caches and
## decision timer, per entry (docs/fleet.md, "Sizing").
sizing:
	cd tools/otelcol && GOWORK=off $(GO) run ./sizing

## jaeger-bin: build Jaeger v1.76.0 from the tools module (about 4 min cold).
jaeger-bin: $(JAEGER)

$(JAEGER): tools/go.mod tools/go.sum
	cd tools && GOWORK=off $(GO) build -o bin/jaeger github.com/jaegertracing/jaeger/cmd/jaeger

clean:
	rm -rf tools/bin
