# otelomni: the two commands are `make demo` and `make test`.
#
# Everything a target needs is fetched by the target itself (Go modules from
# the module proxy; Jaeger built from tools/), so both work on a fresh clone.

GO          ?= go
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
JAEGER      := tools/bin/jaeger
UPSTREAM    := tools/bin/otelcol-upstream
BENCHCOUNT  ?= 5

.PHONY: demo test lint vet staticcheck unit fuzz bench import-bench load jaeger fleet fleet-upstream jaeger-bin clean

## demo: a simulated pipeline instrumented end to end; needs no server.
demo:
	$(GO) run ./examples/diffusion

## test: vet, staticcheck, every test under the race detector, and bounded
## fuzz runs of the record parser, the import's readers of every form and
## its merge of several forms of one request, the
## OTLP/JSON reader, the trace-tree builders, the string bounding and the
## import's OTLP encoder.
test: lint unit fuzz

lint: vet staticcheck
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi

vet:
	$(GO) vet ./...

staticcheck:
	$(GO) run $(STATICCHECK) ./...

# The end-to-end tests need Jaeger; OTELOMNI_REQUIRE_JAEGER makes them fail,
# not skip, if it is missing.
unit: $(JAEGER)
	OTELOMNI_REQUIRE_JAEGER=1 $(GO) test -race -count=1 -timeout 30m ./...

# Each fuzz target runs for FUZZTIME; go test fuzzes one target at a time.
FUZZTIME ?= 10s

fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) ./internal/omnirecord
	$(GO) test -run '^$$' -fuzz '^FuzzInput$$' -fuzztime $(FUZZTIME) ./internal/omnirecord
	$(GO) test -run '^$$' -fuzz '^FuzzMergeForms$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 5s ./internal/omnirecord
	$(GO) test -run '^$$' -fuzz '^FuzzParseOTLPJSON$$' -fuzztime $(FUZZTIME) ./traceview
	$(GO) test -run '^$$' -fuzz '^FuzzTrees$$' -fuzztime $(FUZZTIME) ./traceview
	$(GO) test -run '^$$' -fuzz '^FuzzString$$' -fuzztime $(FUZZTIME) ./sanitize
	$(GO) test -run '^$$' -fuzz '^FuzzProtoExporter$$' -fuzztime $(FUZZTIME) ./cmd/omnitrace

## bench: the overhead benchmarks, medians of $(BENCHCOUNT) runs.
bench:
	$(GO) test -run '^$$' -bench . -benchmem -count $(BENCHCOUNT) ./otelomni

## import-bench: what `omnitrace import` costs against a bare JSON decode
## of the same lines, side by side, with peak memory (docs/omnitrace.md).
IMPORTN ?= 100000
import-bench:
	$(GO) run ./internal/cmd/importbench -n $(IMPORTN) -rounds $(BENCHCOUNT)

## load: drive the demo's engine at RATE requests/s for DURATION into a real
## Jaeger and account for every span (docs/reliability.md).
RATE     ?= 3000
DURATION ?= 60s
load: $(JAEGER)
	$(GO) run ./internal/cmd/load -rate $(RATE) -duration $(DURATION)

## jaeger: build Jaeger once, start it on loopback, run the demo into it,
## read every trace back from its API and print it. KEEP=1 keeps it running.
jaeger: $(JAEGER)
	$(GO) run ./internal/cmd/jaegerdemo $(if $(KEEP),-keep)

## fleet: the collector tier of deploy/ on loopback: a backend Jaeger
## (Badger in a temporary folder), the tail-sampling collector, replicas of
## the multi-stage example sending normal, slow, saturated and failing
## requests; prints what was kept and dropped (docs/fleet.md). KEEP=1 keeps
## it running.
fleet: $(JAEGER)
	$(GO) run ./internal/cmd/fleet $(if $(KEEP),-keep)

## fleet-upstream: the fleet tests with deploy/collector.yaml run by a
## collector built from upstream components only (no Jaeger code).
fleet-upstream: $(JAEGER) $(UPSTREAM)
	OTELOMNI_REQUIRE_JAEGER=1 OTELOMNI_COLLECTOR=$(CURDIR)/$(UPSTREAM) $(GO) test -count=1 -run Fleet ./e2e

$(UPSTREAM): tools/go.mod tools/go.sum tools/upstreamcol/main.go
	cd tools && $(GO) build -o bin/otelcol-upstream ./upstreamcol

## jaeger-bin: build Jaeger v1.76.0 from the tools module (about 4 min cold).
jaeger-bin: $(JAEGER)

$(JAEGER): tools/go.mod tools/go.sum
	cd tools && $(GO) build -o bin/jaeger github.com/jaegertracing/jaeger/cmd/jaeger

clean:
	rm -rf tools/bin
