// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"

	"github.com/otelomni/otelomni/examples/omni/pipeline"
	"github.com/otelomni/otelomni/omnitrace/traceview"
)

// docsInventory lists every code block of README.md and docs/*.md, in the
// order of the docs (README.md first, then docs/ by name), and what the
// harness does with it. TestDocsInventory keeps it complete.
func docsInventory() []docEntry {
	return []docEntry{
		// README.md
		{key: "README.md#otelomni/1", contains: "make demo", cmds: []docCmd{
			{prefix: "make demo", run: runDemo},
			{prefix: "make test", covered: &docCover{reason: "runs this test among all the others", tests: []string{ciTest}}},
		}},
		{key: "README.md#otelomni/2", contains: "go run ./examples/diffusion", cmds: []docCmd{
			{prefix: "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318", run: runSendDemo},
		}},
		{key: "README.md#otelomni/3", contains: "make load", cmds: []docCmd{
			{prefix: "make bench", covered: &docCover{
				reason: "minutes of benchmarks, whose figures docs/performance.md reports; a test never depends on speed: the test runs the same command for two rounds of one iteration",
				tests:  []string{"TestTheDocumentedComparisonRuns", "TestBenchmarkBaselinesMakeTheSameSpansAsOtelomni"}}},
			{prefix: "make load   ", covered: &docCover{
				reason: "60 s at 3000 requests/s: the next line runs the same tool and target for 3 s",
				tests:  []string{"TestDocsShellBlocks"}}},
			{prefix: "make load RATE=200 DURATION=3s", run: runLoad},
			{prefix: "make fleet", covered: &docCover{
				reason: "minutes of the collector tier; the tests run the same tier and traffic (testbed/internal/fleet)",
				tests:  []string{"TestFleetKeepsFailedSlowAndSaturatedRequestsWholeAcrossProcesses", "TestFleetPoliciesKeepByModalityErrorAndQueueWait"}}},
			{prefix: "go run ./omnitrace import vllm.log", run: runImport},
		}},
		{key: "README.md#install/1", contains: "go mod edit -require=github.com/otelomni/otelomni@v0.0.0", cmds: []docCmd{
			{prefix: "go mod edit -require=github.com/otelomni/otelomni@", covered: &docCover{
				reason: "in a module of the reader's own: the test makes a fresh module that requires the instrumentation by a local replace, tidies it and builds a program with it, and checks the module graph it inherits",
				tests:  []string{"TestAFreshModuleInheritsTheAPIAlone"}}},
			{prefix: "go mod edit -require=github.com/otelomni/otelomni/otelsetup@", covered: &docCover{
				reason: "as above; every program of examples/ requires otelsetup so, through go.work",
				tests:  []string{"TestAFreshModuleInheritsTheAPIAlone", "TestDocsShellBlocks"}}},
			{prefix: "go mod tidy", covered: &docCover{
				reason: "as above", tests: []string{"TestAFreshModuleInheritsTheAPIAlone"}}},
		}},
		{key: "README.md#use/1", contains: "func handle(", goex: &goExample{given: readmeUseGiven, run: runReadmeUse}},

		// docs/attributes.md
		{key: "docs/attributes.md#attributes-of-your-own/1", contains: "attrs.OutputIndexKey.Int(i)", goex: &goExample{
			given: outputAttrsGiven, outcome: []string{"TestAttributesOtelomniSetsItselfAreLeftOut", "TestIntsOutOfTheirRangeAreRefusedAndCounted"}}},

		// docs/engine.md
		{key: "docs/engine.md#the-engines-start/1", contains: "in.StartEngine", goex: &goExample{record: true, given: engineStartGiven, run: runEngineStart}},
		{key: "docs/engine.md#the-engines-start/2", contains: "omni.engine.start", checkedBy: "docs/engine.md#the-engines-start/1"},
		{key: "docs/engine.md#the-configuration-on-the-resource/1", contains: "WithResourceAttributes", goex: &goExample{
			given:   ctxGiven,
			outcome: []string{"TestResourceAttributesAreOnTheResourceAndWin"}}},
		{key: "docs/engine.md#batches-and-their-links/1", contains: "trace of the batch", checkedBy: "docs/engine.md#batches-and-their-links/2"},
		{key: "docs/engine.md#batches-and-their-links/2", contains: "runForwardPass()", goex: &goExample{record: true, given: batchLiveGiven, run: runBatchLive}},
		{key: "docs/engine.md#batches-and-their-links/3", contains: "rb.Record(reqA, recA)", goex: &goExample{record: true, given: batchRecordGiven, run: runBatchRecord}},
		{key: "docs/engine.md#batches-and-their-links/4", contains: "omni.batch", check: checkTraceQL, after: "docs/engine.md#batches-and-their-links/2"},
		{key: "docs/engine.md#logs-that-carry-the-trace/1", contains: "otelslog.NewHandler", goex: &goExample{
			outcome: []string{"TestLogsCarryTheirTraceAndAreExportedOnlyWhenAsked"}}},

		// docs/fleet.md
		{key: fleetMakeKey, contains: "make fleet", cmds: []docCmd{
			{prefix: "make fleet  ", run: runMakeFleet},
			{prefix: "make fleet KEEP=1", run: runMakeFleetKeep},
		}},
		{key: fleetTopoKey, contains: "collector tier", covered: &docCover{
			reason: "a diagram of deploy/collector.yaml's pipelines: the test reads it from the page and checks each pipeline against the file",
			tests:  []string{"TestFleetTopologyIsTheShippedPipelines"}}},
		{key: "docs/fleet.md#running-it/1", contains: "make jaeger-bin otelcol-bin", cmds: []docCmd{
			{prefix: "make jaeger-bin otelcol-bin", run: runMakeBins},
			{prefix: "OMNI_BADGER_DIR=/var/lib/otelomni/badger tools/bin/jaeger", run: runBackend},
			{prefix: "tools/bin/otelcol --config file:deploy/collector.yaml &", run: runCollector},
			{prefix: "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318", run: runFleetExample},
		}},
		{key: "docs/fleet.md#running-it/2", contains: "otelcol-contrib --config", cmds: []docCmd{
			{prefix: "otelcol-contrib --config file:deploy/collector.yaml", covered: &docCover{
				reason: "an otelcol-contrib release binary, downloaded, and tests use no network; the same file runs with tools/bin/otelcol in the fleet tests",
				tests:  fleetTests}},
		}},
		{key: "docs/fleet.md#running-it/3", contains: "OTELOMNI_COLLECTOR", cmds: []docCmd{
			{prefix: "OTELOMNI_COLLECTOR=/usr/local/bin/otelcol-contrib", covered: &docCover{
				reason: "the fleet tests with an otelcol-contrib release binary, which is not here; make test runs the same tests with tools/bin/otelcol",
				tests:  fleetTests}},
		}},
		{key: fleetSampleKey, contains: "policies:", checkedBy: fleetMakeKey},
		{key: "docs/fleet.md#the-decision-waits/1", contains: "OMNI_DECISION_WAIT", covered: &docCover{
			reason: "the rule for the decision wait: the tests check the shipped default against it and the SDK's default batch delay against the page",
			tests:  []string{"TestShippedDefaultsFitTheSizingRule", "TestTheSizingRuleIsThePages"}}},
		{key: "docs/fleet.md#the-decision-waits/2", contains: "OMNI_DECISION_WAIT_MAX", covered: &docCover{
			reason: "the rule for the maximum wait: the test checks the shipped default against it, for a request as long as the slow-video threshold",
			tests:  []string{"TestShippedDefaultsFitTheSizingRule"}}},
		{key: "docs/fleet.md#the-decision-waits/3", contains: "sampling_traces_on_memory", cmds: []docCmd{
			{prefix: "curl -s 127.0.0.1:8888/metrics", run: runDecisionMetrics},
		}},
		{key: "docs/fleet.md#sizing/1", contains: "decision caches", covered: &docCover{
			reason: "the sizing rule: the tests read its coefficients and the table of the defaults from the page and evaluate it on the shipped file",
			tests:  []string{"TestTheSizingRuleIsThePages", "TestShippedDefaultsFitTheSizingRule"}}},
		{key: "docs/fleet.md#sizing/2", contains: "OMNI_MEMORY_LIMIT_MIB", covered: &docCover{
			reason: "the settings the rule gives: the test checks each on the shipped defaults",
			tests:  []string{"TestShippedDefaultsFitTheSizingRule"}}},
		{key: "docs/fleet.md#sizing/3", contains: "make sizing", cmds: []docCmd{
			{prefix: "make sizing", run: runMakeSizing},
			{prefix: "OMNI_EXPECTED_TRACES_PER_SEC=100000 OMNI_DECISION_WAIT_MAX=1h tools/bin/otelcol", run: runIdleCollector},
			{prefix: "sleep 8; curl", run: runHeapCurl},
			{prefix: "sleep 60; curl", run: runHeapCurl},
			{prefix: "kill %1", run: runKillJob},
		}},
		{key: fleetMetricsKey, contains: "span metrics count", checkedBy: fleetMakeKey},
		{key: fleetLayoutKey, contains: "Share of requests where each phase", covered: &docCover{
			reason: "a drawing of deploy/grafana/otelomni-fleet.json: the test reads it from the page and checks each panel's place and title and the variables against the file",
			tests:  []string{"TestFleetDashboardLayoutIsTheShippedFile"}}},
		{key: "docs/fleet.md#scaling-out/1", contains: "loadbalancing", covered: &docCover{
			reason:     "a topology of several collectors behind otelcol-contrib's loadbalancing exporter, which this repository does not run (the page says so)",
			untestable: true}},
		{key: "docs/fleet.md#the-tests/1", contains: "-run Fleet", cmds: []docCmd{
			{prefix: "go test ./testbed/e2e -run Fleet", covered: &docCover{
				reason: "the fleet tests, which make test runs among all the others",
				tests:  fleetTests}},
		}},

		// docs/getting-started.md
		{key: cloneBlockKey, contains: "git clone", cmds: []docCmd{
			{prefix: "git clone <this repository>", run: func(t *testing.T, s *docSession, c string) {
				if c != s.ws.cloneCmd {
					t.Fatalf("the workspace was cloned with %q, the block shows %q", s.ws.cloneCmd, c)
				}
				t.Logf("ran (%s as <this repository>) to make the workspace: %s", s.ws.src, c)
			}},
			{prefix: "make demo", run: runDemo},
		}},
		{key: "docs/getting-started.md#2-add-otelomni-to-your-engine/1", contains: "go get", cmds: []docCmd{
			{prefix: "go get github.com/otelomni/otelomni", covered: &docCover{
				reason: "fetches the module from the module proxy, and tests reach loopback only; the code below compiles against this checkout",
				tests:  []string{"TestDocsGoBlocks"}}},
		}},
		{key: "docs/getting-started.md#2-add-otelomni-to-your-engine/2", contains: "func handle(", goex: &goExample{given: gettingStartedGiven, run: runGettingStarted}},
		{key: "docs/getting-started.md#jaegers-official-all-in-one-release-with-its-web-ui/1", contains: "./jaeger", cmds: []docCmd{
			{prefix: "./jaeger", covered: &docCover{
				reason: "Jaeger's official release, downloaded, and tests use no network; the same OTLP receivers, built from tools/, take the next block's traces",
				tests:  []string{"TestDocsShellBlocks"}}},
		}},
		{key: "docs/getting-started.md#jaegers-official-all-in-one-release-with-its-web-ui/2", contains: "go run ./examples/diffusion", cmds: []docCmd{
			{prefix: "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318", run: func(t *testing.T, s *docSession, c string) {
				runSendDemo(t, s, c)
				// The text after it: "For gRPC use port 4317 and OTEL_EXPORTER_OTLP_PROTOCOL=grpc."
				t.Run("grpc", func(t *testing.T) { runSendDemo(t, s, grpcVariant(c)) })
			}},
		}},
		{key: "docs/getting-started.md#without-downloading-anything-this-repositorys-jaeger/1", contains: "make jaeger KEEP=1", cmds: []docCmd{
			{prefix: "make jaeger  ", run: runMakeJaeger},
			{prefix: "make jaeger KEEP=1", run: runMakeJaegerKeep},
		}},
		{key: "docs/getting-started.md#without-downloading-anything-this-repositorys-jaeger/2", contains: "curl", cmds: []docCmd{
			{prefix: "curl 'http://127.0.0.1:PORT/api/v3/traces/<trace-id>'", run: runCurlKept},
			{prefix: "curl 'http://127.0.0.1:PORT/api/v3/traces?query.service_name=", run: func(t *testing.T, s *docSession, c string) {
				runCurlKept(t, s, c)
				// The program's own "Send more:" line is a command shown too.
				t.Run("send more", func(t *testing.T) { sendMore(t, s) })
				stopKept(t, s)
			}},
		}},
		{key: "docs/getting-started.md#grafana-tempo/1", contains: "http_listen_port", covered: &docCover{
			reason:     "Grafana Tempo's configuration: no Tempo runs in the tests",
			untestable: true}},
		{key: "docs/getting-started.md#traceql-tempo/1", contains: "omni.diffusion.exec", check: checkTraceQL, after: gettingStartedSend},
		{key: "docs/getting-started.md#traceql-tempo/2", contains: "output_ready_wait", check: checkTraceQL, after: gettingStartedSend},
		{key: "docs/getting-started.md#traceql-tempo/3", contains: "queue_wait", check: checkTraceQL, after: gettingStartedSend},
		{key: "docs/getting-started.md#traceql-tempo/4", contains: "duration = 0", check: checkTraceQL, after: gettingStartedSend},
		{key: "docs/getting-started.md#traceql-tempo/5", contains: "client_abort", check: checkTraceQL, after: gettingStartedSend},

		// docs/metrics.md
		{key: "docs/metrics.md#turning-them-on/1", contains: "WithMeterProvider", goex: &goExample{
			given:   ctxGiven,
			outcome: []string{"TestSetupMetricsFromEnvironment", "TestMetricsCountEveryRequestWhateverTheSampler"}}},
		{key: "docs/metrics.md#turning-them-on/2", contains: "-linger", cmds: []docCmd{
			{prefix: "OTEL_TRACES_EXPORTER=none OTEL_METRICS_EXPORTER=prometheus", run: runLinger},
		}},
		{key: "docs/metrics.md#turning-them-on/3", contains: "curl", cmds: []docCmd{
			{prefix: "curl -s http://127.0.0.1:9464/metrics", run: runScrape},
		}},
		{key: "docs/metrics.md#buckets/1", contains: "AggregationBase2ExponentialHistogram", goex: &goExample{given: viewGiven, run: runView}},

		// docs/multi-stage.md
		{key: "docs/multi-stage.md#multi-stage-pipelines/1", contains: "./examples/omni", cmds: []docCmd{
			{prefix: "go run ./examples/omni -requests 6", run: runOmniLocal},
			{prefix: "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318", run: runOmniJaeger},
		}},
		{key: "docs/multi-stage.md#the-tree/1", contains: "thinker", check: checkPipelineTree, after: "docs/multi-stage.md#multi-stage-pipelines/1"},
		{key: "docs/multi-stage.md#the-tree/2", contains: "mooncake", check: checkPipelineTree, after: "docs/multi-stage.md#multi-stage-pipelines/1"},
		{key: "docs/multi-stage.md#instrumenting-a-stage-process/1", contains: "StartStage", goex: &goExample{
			given: stageGiven, outcome: []string{"TestMultiStagePipelinesAreOneTraceAcrossProcesses"}}},
		{key: "docs/multi-stage.md#finding-the-slowest-hand-over/1", contains: "omni.transfer", check: checkTraceQL, after: "docs/multi-stage.md#multi-stage-pipelines/1"},

		// docs/omnitrace.md
		{key: "docs/omnitrace.md#omnitrace/1", contains: "go build -o bin/omnitrace", cmds: []docCmd{
			{prefix: "go build -o bin/omnitrace ./omnitrace", run: runBuildOmnitrace},
		}},
		{key: omnitraceImportKey, contains: "omnitrace import", cmds: []docCmd{
			{prefix: "omnitrace import vllm.log  ", run: runImportConsole},
			{prefix: "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 \\\n  omnitrace import summary.json vllm.log", run: runImportMerged},
			{prefix: "omnitrace import -tz Asia/Tokyo vllm.log", run: runImportTokyo},
			{prefix: "omnitrace import -out traces.json vllm.log", run: runImportOut},
			{prefix: "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 \\\n  omnitrace import -follow -checkpoint vllm.cp vllm.log", run: runImportFollow},
		}},
		{key: summaryBlockKey, contains: "stage_table", check: checkSummaryBlock, after: omnitraceImportKey},
		{key: logBlockKey, contains: "[OmniTiming]", check: checkLogBlock, after: omnitraceImportKey},
		{key: eventsBlockKey, contains: "transfer_stats", check: checkEventsBlock, after: omnitraceImportKey},
		{key: jsonlBlockKey, contains: "diffusion_metrics", check: checkJSONLBlock, after: omnitraceImportKey},
		{key: badInputKey, contains: "127.0.0.1:1", cmds: []docCmd{
			{prefix: "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:1 omnitrace import vllm.log", run: runBadInput},
			{prefix: "echo $?", covered: &docCover{
				reason: "the status of the command above in the reader's shell: the run of that command checks it is the one shown",
				tests:  []string{"TestDocsShellBlocks"}}},
		}},
		{key: envIgnoredKey, contains: "s3cret", cmds: []docCmd{
			{prefix: "OTEL_EXPORTER_OTLP_ENDPOINT=http://user:s3cret@collector.example:4318 omnitrace import -out traces.json vllm.log", run: runEnvIgnored},
		}},
		{key: "docs/omnitrace.md#cost/1", contains: "importbench", cmds: []docCmd{
			{prefix: "go run ./testbed/cmd/importbench -n 100000 -rounds 5", covered: &docCover{
				reason: "minutes of benchmarks, whose figures the next block reports; a test never depends on speed",
				tests:  []string{"BenchmarkImport"}}},
		}},
		{key: "docs/omnitrace.md#cost/2", contains: "machine:", covered: &docCover{
			reason: "one machine's measured figures of the command above", tests: []string{"BenchmarkImport"}}},
		{key: "docs/omnitrace.md#memory/1", contains: "peak RSS", covered: &docCover{
			reason: "one machine's measured peak resident memory; the test holds its growth with the input",
			tests:  []string{"TestPeakMemoryDoesNotGrowWithTheInput"}}},
		{key: "docs/omnitrace.md#omnitrace-table/1", contains: "omnitrace table", cmds: []docCmd{
			{prefix: "omnitrace table -jaeger http://127.0.0.1:16686 ", run: runTableJaeger},
			{prefix: "omnitrace table -file t.json -request 0_501f96ba-7c1d", run: runTableFile},
		}},
		{key: tableSampleKey, contains: "request ", checkedBy: "docs/omnitrace.md#omnitrace-table/1"},
		{key: "docs/omnitrace.md#omnitrace-summary/1", contains: "omnitrace summary", cmds: []docCmd{
			{prefix: "omnitrace summary -jaeger http://127.0.0.1:16686 -service omni-diffusion-demo -since 1h", run: runSummaryJaeger},
			{prefix: "omnitrace summary -file t.json", run: runSummaryFile},
		}},
		{key: summarySampleKey, contains: "requests", checkedBy: "docs/omnitrace.md#omnitrace-summary/1"},
		{key: diffOmniKey, contains: "-mix slow=1", cmds: []docCmd{
			{prefix: "go run ./examples/omni -requests 40 -out base.json", run: runDiffExample},
			{prefix: "go run ./examples/omni -requests 40 -mix slow=1 -slow 150ms -out new.json", run: runDiffExample},
			{prefix: "omnitrace diff base.json new.json", run: runDiffOmni},
			{prefix: "omnitrace diff -fail-on 50% base.json new.json; echo $?", run: runDiffFailOn},
		}},
		{key: diffLogsKey, contains: "before/vllm.log", cmds: []docCmd{
			{prefix: "omnitrace diff before/vllm.log after/summary.json,after/vllm.log", run: runDiffLogs},
		}},
		{key: diffSampleKey, contains: "critical path:", checkedBy: diffLogsKey},
		{key: diffCritKey, contains: "-critical", cmds: []docCmd{
			{prefix: "omnitrace table -critical -file new.json -request chatcmpl-speech-00010000", run: runTableCritical},
		}},
		{key: diffFormatsKey, contains: "-format json", cmds: []docCmd{
			{prefix: "omnitrace diff -format json base.json new.json > diff.json", run: runDiffJSON},
			{prefix: "omnitrace diff -format csv base.json new.json > diff.csv", run: runDiffCSV},
			{prefix: "omnitrace diff -html report.html base.json new.json", run: runDiffHTML},
			{prefix: "omnitrace diff -jaeger http://127.0.0.1:16686 -service omni-gateway now-2h/now-1h now-1h/now", covered: &docCover{
				reason: "two runs an hour apart in the reader's Jaeger; the test sends two runs an hour apart to a Jaeger and diffs their windows",
				tests:  []string{"TestDiffReadsJaegerWindows"}}},
		}},
		{key: "docs/omnitrace.md#omnitrace-recover/1", contains: "omnitrace recover", cmds: []docCmd{
			{prefix: "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 omnitrace recover /var/lib/engine/journal", covered: &docCover{
				reason: "reads the crash journal of the reader's engine in /var/lib, which the tests do not write; the same command on the journal of an engine killed with SIGKILL",
				tests:  []string{"TestRecoverExportsAKilledEnginesSpans", "TestAKilledStageJoinsItsRequestsTrace"}}},
			{prefix: "omnitrace recover -out recovered.json /var/lib/engine/journal", covered: &docCover{
				reason: "the same journal, to a file",
				tests:  []string{"TestRecoverExportsAKilledEnginesSpans", "TestRecoverLeavesLiveAndUnreadableJournals", "TestRecoverUsage"}}},
		}},

		// docs/performance.md
		{key: "docs/performance.md#running-it/1", contains: "make bench", cmds: []docCmd{
			{prefix: "make bench", covered: &docCover{
				reason: "minutes of benchmarks, whose figures the page reports; a test never depends on speed: the test runs the same command for two rounds of one iteration",
				tests:  []string{"TestTheDocumentedComparisonRuns", "TestBenchmarkBaselinesMakeTheSameSpansAsOtelomni"}}},
		}},
		{key: "docs/performance.md#where-otelomnis-own-work-goes/1", contains: "cpuprofile", cmds: []docCmd{
			{prefix: "go test -c -o /tmp/oo.test ./otelomni", covered: &docCover{
				reason: "builds the benchmark binary the next commands profile",
				tests:  []string{"BenchmarkRequest"}}},
			{prefix: "/tmp/oo.test -test.run", covered: &docCover{
				reason: "a 40 s profile of one sub-benchmark, whose findings the page reports",
				tests:  []string{"BenchmarkRequest"}}},
			{prefix: "go tool pprof -top", covered: &docCover{
				reason: "reads the profile the command before writes",
				tests:  []string{"BenchmarkRequest"}}},
			{prefix: "GOGC=off GODEBUG=asyncpreemptoff=1 valgrind", covered: &docCover{
				reason: "valgrind, which the tests do not install, counting the instructions of the same sub-benchmark",
				tests:  []string{"BenchmarkRequest"}}},
			{prefix: "callgrind_annotate", covered: &docCover{
				reason: "reads the counts the command before writes",
				tests:  []string{"BenchmarkRequest"}}},
		}},

		// docs/reliability.md
		{key: "docs/reliability.md#with-both-cores-busy/1", contains: "make test", cmds: []docCmd{
			{prefix: "for i in 1 2", covered: &docCover{reason: "make test, beside two busy loops: this test among all the others", tests: []string{ciTest}}},
		}},
	}
}

var (
	fleetTests = []string{
		"TestFleetKeepsFailedSlowAndSaturatedRequestsWholeAcrossProcesses", "TestFleetPoliciesKeepByModalityErrorAndQueueWait",
		"TestFleetBaselineKeepsTheConfiguredShareOfOtherTraces", "TestFleetBackendReadsTracesBackAfterRestart",
		"TestFleetRequestOutlivingTheMaximumWaitFollowsItsEarlySpans",
		"TestFleetRequestLongerThanTheDecisionWaitIsDecidedOnItsRequestSpan",
	}
)

// gettingStartedSend is the page's command that sends the demo to Jaeger:
// its queries are checked against what it sent.
const gettingStartedSend = "docs/getting-started.md#jaegers-official-all-in-one-release-with-its-web-ui/2"

// ctxGiven is the request's (or main's) context.
const ctxGiven = "import \"context\"\n\nvar ctx = context.Background()\n"

// ---------------------------------------------------------------------------
// README.md: Use.

// readmeUseGiven: the requests the test sends (DOCS_REQUESTS: id:flags, a
// flag p for a pre-processor, e for a scheduler interval before the
// request's arrival, f for a failing postprocess), and the three phases.
const readmeUseGiven = `
import (
	"context"
	"errors"
	"os"
	"strings"
	"sync/atomic"
	"time"
)

type Request struct {
	ID                         string
	Arrived, Accepted, Running time.Time
	HasPreprocessor            bool
}

var (
	requests  = make(chan Request, 16)
	failAt    = map[int64]bool{}
	postCalls atomic.Int64
)

func init() {
	now := time.Now()
	for i, r := range strings.Split(os.Getenv("DOCS_REQUESTS"), ",") {
		id, flags, _ := strings.Cut(r, ":")
		req := Request{ID: id, Arrived: now.Add(-10 * time.Millisecond), HasPreprocessor: strings.Contains(flags, "p")}
		req.Accepted, req.Running = req.Arrived.Add(time.Millisecond), req.Arrived.Add(5*time.Millisecond)
		if strings.Contains(flags, "e") {
			req.Accepted = req.Arrived.Add(-5 * time.Millisecond)
		}
		if strings.Contains(flags, "f") {
			failAt[int64(i+1)] = true
		}
		requests <- req
	}
	close(requests)
}

func preprocess(context.Context) error { return nil }

func denoise(context.Context) error { return nil }

func postprocess(context.Context) error {
	if failAt[postCalls.Add(1)] {
		return errors.New("VAE output is NaN")
	}
	return nil
}
`

func runReadmeUse(t *testing.T, s *docSession, bin string) {
	jaegerEnv := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + s.jaeger.OTLPEndpoint("http/protobuf"),
		"OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf", "OTEL_METRICS_EXPORTER=none"}
	t.Run("traced", func(t *testing.T) {
		from := time.Now()
		_, errOut := runProgram(t, s, bin, append(jaegerEnv, "OTEL_SERVICE_NAME=docs-readme-use",
			"DOCS_REQUESTS=docs-plain:,docs-pre-fail:pf,docs-early:e")...)
		traces := byRequestID(s.requestTraces(t, "docs-readme-use", from, 3))
		base := []string{"omni.request", "omni.diffusion.exec", "omni.diffusion.forward", "omni.diffusion.postprocess"}
		want := map[string][]string{
			"docs-plain":    append(base, "omni.diffusion.queue_wait"),
			"docs-pre-fail": append(base, "omni.diffusion.queue_wait", "omni.diffusion.preprocess"), // a pre-processor: its span
			"docs-early":    base,                                                                   // the refused queue wait: no span
		}
		for id, names := range want {
			tr := traces[id]
			if got, w := spanNames(tr), sortedCopy(names); strings.Join(got, " ") != strings.Join(w, " ") {
				t.Errorf("%s: spans %v, want %v", id, got, w)
			}
			checkTree(t, id, tr, diffusionParent)
			req := find(tr, "omni.request")
			failed := req != nil && req.StatusCode == codes.Error && req.Str("error.type") != ""
			if failed != (id == "docs-pre-fail") {
				t.Errorf("%s: request status %v, error.type %q", id, req.StatusCode, req.Str("error.type"))
			}
		}
		// The block's own log lines (log.Print's date and time first): the
		// refusal, naming the phase, and the failed request.
		logged := regexp.MustCompile(`(?m)^\S+ \S+ (omni: phase queue_wait: .*|request docs-pre-fail: VAE output is NaN)$`).FindAllString(errOut, -1)
		if len(logged) != 2 {
			t.Errorf("want the refusal naming queue_wait and the failed request logged; stderr:\n%s", errOut)
		}
	})
	t.Run("a value that is not valid", func(t *testing.T) {
		from := time.Now()
		_, errOut := runProgram(t, s, bin, append(jaegerEnv, "OTEL_SERVICE_NAME=docs-readme-ignored",
			"OTEL_BSP_MAX_QUEUE_SIZE=lots", "DOCS_REQUESTS=docs-ignored:")...)
		if len(lines(errOut, "tracing off: ")) != 0 || len(lines(errOut, `otelsetup: OTEL_BSP_MAX_QUEUE_SIZE="lots"`)) != 1 ||
			!strings.Contains(errOut, "ignored, using 2048") {
			t.Errorf("want one warning naming the variable and what is used instead, and tracing on:\n%s", errOut)
		}
		if tr := byRequestID(s.requestTraces(t, "docs-readme-ignored", from, 1)); len(tr["docs-ignored"]) == 0 {
			t.Errorf("the request's trace did not reach Jaeger: %v", tr)
		}
	})
	t.Run("dead collector", func(t *testing.T) {
		_, errOut := runProgram(t, s, bin, "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:"+freePort(t),
			"OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf", "OTEL_METRICS_EXPORTER=none", "DOCS_REQUESTS=docs-lost:")
		if len(lines(errOut, "tracing: ")) != 1 || !strings.Contains(errOut, "spans did not reach the collector") {
			t.Errorf("Shutdown does not report the loss:\n%s", errOut)
		}
	})
}

// diffusionParent: span name -> its parent's name, for a single-stage
// diffusion request.
var diffusionParent = map[string]string{
	"omni.request":                     "",
	"omni.diffusion.queue_wait":        "omni.request",
	"omni.diffusion.preprocess":        "omni.request",
	"omni.diffusion.exec":              "omni.request",
	"omni.diffusion.kv_recv":           "omni.diffusion.exec",
	"omni.diffusion.forward":           "omni.diffusion.exec",
	"omni.diffusion.vae_decode":        "omni.diffusion.exec",
	"omni.diffusion.output_ready_wait": "omni.request",
	"omni.diffusion.postprocess":       "omni.request",
}

// ---------------------------------------------------------------------------
// docs/getting-started.md: the program.

const gettingStartedGiven = `
import (
	"context"
	"errors"

	"github.com/otelomni/otelomni/otelomni"
	"github.com/otelomni/otelomni/spans"
)

type Request struct {
	ID, Model string
	Steps     int
}

func serve(ctx context.Context, in *otelomni.Instrumenter) {
	for _, r := range []*Request{{ID: "gs-ok", Model: "Qwen/Qwen-Image", Steps: 50}, {ID: "gs-oom", Model: "Qwen/Qwen-Image", Steps: 30}} {
		_ = handle(ctx, in, r)
	}
}

func run(ctx context.Context, req *otelomni.Request, r *Request) error {
	exec := req.StartPhase(ctx, spans.Exec)
	defer exec.End(nil)
	if r.ID == "gs-oom" {
		return errors.New("CUDA out of memory")
	}
	return nil
}
`

func runGettingStarted(t *testing.T, s *docSession, bin string) {
	from := time.Now()
	runProgram(t, s, bin, "OTEL_EXPORTER_OTLP_ENDPOINT="+s.jaeger.OTLPEndpoint("http/protobuf"),
		"OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf", "OTEL_METRICS_EXPORTER=none", "OTEL_SERVICE_NAME=docs-getting-started")
	traces := byRequestID(s.requestTraces(t, "docs-getting-started", from, 2))
	for id, steps := range map[string]int64{"gs-ok": 50, "gs-oom": 30} {
		req := find(traces[id], "omni.request")
		if req == nil || find(traces[id], "omni.diffusion.exec") == nil {
			t.Errorf("%s: spans %v", id, spanNames(traces[id]))
			continue
		}
		n, _ := req.Int("omni.diffusion.num_inference_steps")
		if req.Str("gen_ai.request.model") != "Qwen/Qwen-Image" || req.Str("omni.output.modality") != "image" || n != steps {
			t.Errorf("%s: model %q, modality %q, steps %d", id, req.Str("gen_ai.request.model"), req.Str("omni.output.modality"), n)
		}
		if failed := req.StatusCode == codes.Error && req.Str("error.type") != ""; failed != (id == "gs-oom") {
			t.Errorf("%s: status %v, error.type %q", id, req.StatusCode, req.Str("error.type"))
		}
	}
}

// ---------------------------------------------------------------------------
// docs/engine.md.

const engineStartGiven = `
import "context"

var ctx = context.Background()

func loadWeights() {}

func usedBytes() int64 { return 38 << 30 }

func warmUp() {}
`

// runEngineStart: the block makes the tree the diagram below it draws,
// with the attributes the diagram names on each load.
func runEngineStart(t *testing.T, s *docSession, bin string) {
	_, ss := runRecorded(t, s, bin)
	nodes, err := parseTree(blockOf(t, "docs/engine.md#the-engines-start/2").text)
	if err != nil {
		t.Fatal(err)
	}
	diagram := treeEdges(nodes)
	for e := range spanEdges(ss) {
		if !diagram[e] {
			t.Errorf("the diagram does not show %s under %q", e[0], e[1])
		}
	}
	if names := spanNames(ss); strings.Join(names, " ") != "omni.engine.load omni.engine.start omni.engine.warmup" {
		t.Errorf("spans %v", names)
	}
	load := find(ss, "omni.engine.load")
	for _, n := range nodes {
		if n.name != "omni.engine.load" || load == nil {
			continue
		}
		for _, a := range regexp.MustCompile(`(omni\.engine)?(\.[a-z_.]+[a-z])`).FindAllStringSubmatch(n.note, -1) {
			if _, ok := load.Attrs["omni.engine"+a[2]]; !ok {
				t.Errorf("the load has no omni.engine%s, which the diagram names", a[2])
			}
		}
	}
	if load != nil {
		if v, _ := load.Int("omni.engine.accelerator_memory_bytes"); v != 38<<30 {
			t.Errorf("accelerator memory %d, want what usedBytes reported", v)
		}
	}
}

const batchLiveGiven = `
import (
	"context"

	"github.com/otelomni/otelomni/otelomni"
	"github.com/otelomni/otelomni/spans"
)

const model = "Qwen/Qwen-Image"

var (
	ctx          = context.Background()
	ctxA, reqA   = in.Start(ctx, otelomni.RequestInfo{ID: "docs-a", Model: model})
	ctxB, reqB   = in.Start(ctx, otelomni.RequestInfo{ID: "docs-b", Model: model})
	execA, execB = reqA.StartPhase(ctxA, spans.Exec), reqB.StartPhase(ctxB, spans.Exec)
)

func runForwardPass() {}

func docAfter() {
	execA.End(nil)
	execB.End(nil)
	reqA.End(nil)
	reqB.End(nil)
}
`

const batchRecordGiven = `
import (
	"context"
	"time"

	"github.com/otelomni/otelomni/otelomni"
	"github.com/otelomni/otelomni/spans"
)

var (
	ctx        = context.Background()
	t0         = time.Now().Add(-time.Second)
	t1         = t0.Add(800 * time.Millisecond)
	_, reqA    = in.Start(ctx, otelomni.RequestInfo{ID: "docs-a", Start: t0.Add(-100 * time.Millisecond)})
	_, reqB    = in.Start(ctx, otelomni.RequestInfo{ID: "docs-b", Start: t0.Add(-50 * time.Millisecond)})
	recA, recB = &spans.DiffusionRecord{Exec: spans.Between(t0, t1)}, &spans.DiffusionRecord{Exec: spans.Between(t0, t1)}
)

func docAfter() {
	reqA.End(nil)
	reqB.End(nil)
}
`

// checkBatch: the batch is the root of a trace of its own, carries its id
// and size, and links to each member's exec, which carries the batch's id
// and size and links back (the diagram of the section).
func checkBatch(t *testing.T, ss []traceview.Span) *traceview.Span {
	t.Helper()
	batch := find(ss, "omni.batch")
	if batch == nil {
		t.Fatalf("no omni.batch span: %v", spanNames(ss))
	}
	if batch.ParentID != "" || batch.Str("omni.batch.id") != "step-7" {
		t.Errorf("the batch: parent %q, id %q", batch.ParentID, batch.Str("omni.batch.id"))
	}
	if n, _ := batch.Int("omni.batch.size"); n != 2 {
		t.Errorf("batch size %d", n)
	}
	execs := 0
	for _, sp := range ss {
		if sp.Name != "omni.diffusion.exec" {
			continue
		}
		execs++
		if sp.TraceID == batch.TraceID {
			t.Errorf("an exec is in the batch's trace")
		}
		n, _ := sp.Int("omni.batch.size")
		if sp.Str("omni.batch.id") != "step-7" || n != 2 || !linksTo(sp, *batch) || !linksTo(*batch, sp) {
			t.Errorf("exec %s: batch id %q size %d, links %v; the batch's links %v", sp.SpanID, sp.Str("omni.batch.id"), n, sp.Links, batch.Links)
		}
	}
	if execs != 2 || len(batch.Links) != 2 {
		t.Errorf("%d execs, the batch has %d links; want 2 and 2", execs, len(batch.Links))
	}
	return batch
}

func linksTo(from, to traceview.Span) bool {
	for _, l := range from.Links {
		if l.TraceID == to.TraceID && l.SpanID == to.SpanID {
			return true
		}
	}
	return false
}

func runBatchLive(t *testing.T, s *docSession, bin string) {
	_, ss := runRecorded(t, s, bin)
	checkBatch(t, ss)
	s.spans[s.key] = ss
}

func runBatchRecord(t *testing.T, s *docSession, bin string) {
	errOut, ss := runRecorded(t, s, bin)
	if errOut != "" {
		t.Errorf("the record path refused a phase: %s", errOut)
	}
	batch := checkBatch(t, ss)
	if d := batch.Duration(); d != 800*time.Millisecond {
		t.Errorf("the batch lasts %v, want t1 - t0", d)
	}
}

// ---------------------------------------------------------------------------
// docs/metrics.md: a View for exponential histograms.

const viewGiven = `
import (
	"context"
	"fmt"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/otelomni/otelomni/otelomni"
	"github.com/otelomni/otelomni/spans"
)

var reader = sdkmetric.NewManualReader()

func main() { docBlock() }

// docUse records one request through the block's provider and prints
// each instrument's aggregation.
func docUse(vars map[string]any) {
	ctx := context.Background()
	in := otelomni.New(otelomni.WithMeterProvider(vars["mp"].(*sdkmetric.MeterProvider)))
	ctx, req := in.Start(ctx, otelomni.RequestInfo{ID: "docs-view"})
	req.StartPhase(ctx, spans.Exec).End(nil)
	req.End(nil)
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		panic(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			fmt.Printf("%s %T\n", m.Name, m.Data)
		}
	}
}
`

// runView: with the View, the omni.* instruments are exponential
// histograms; the others keep their buckets.
func runView(t *testing.T, s *docSession, bin string) {
	out, _ := runProgram(t, s, bin)
	got := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		name, typ, _ := strings.Cut(l, " ")
		got[name] = typ
	}
	if !strings.Contains(got["omni.phase.duration"], "ExponentialHistogram") {
		t.Errorf("omni.phase.duration is %q, want an exponential histogram", got["omni.phase.duration"])
	}
	if typ := got["gen_ai.server.request.duration"]; typ == "" || strings.Contains(typ, "Exponential") {
		t.Errorf("gen_ai.server.request.duration is %q: the View names omni.* only", typ)
	}
}

// ---------------------------------------------------------------------------
// docs/attributes.md: a phase's output and step.

const outputAttrsGiven = `
import (
	"context"

	"github.com/otelomni/otelomni/otelomni"
	"github.com/otelomni/otelomni/spans"
)

var (
	ctx, req = otelomni.New().Start(context.Background(), otelomni.RequestInfo{ID: "docs-outputs"})
	fwd      = req.StartPhase(ctx, spans.Forward)
	i, s     = 0, 0
	last     = true
)
`

// ---------------------------------------------------------------------------
// docs/multi-stage.md: a stage process.

const stageGiven = `
import (
	"time"

	"go.opentelemetry.io/otel/propagation"

	"github.com/otelomni/otelomni/otelomni"
)

var in = otelomni.New()

type StageMessage struct {
	ID       string
	Trace    propagation.MapCarrier
	Transfer *Sent
}

// Sent is what a sending stage says of its hand-over.
type Sent struct {
	From       int
	Bytes      int64
	Start, End time.Time
}

type payload struct{}

func schedulerTimes(string) (queued, scheduled, first, last time.Time) {
	t := time.Now()
	return t, t.Add(time.Millisecond), t.Add(2 * time.Millisecond), t.Add(3 * time.Millisecond)
}

func send(StageMessage)                   {}
func lastStageAnswer(string) error        { return nil }
func decode(StageMessage) payload         { return payload{} }
func process(payload)                     {}
func serialize(*StageMessage) int         { return 0 }
func forward(StageMessage)                {}

const inputTokens, outputTokens = 31, 120
`

// expectOmni is the spans the multi-stage example makes for its request i.
func expectOmni(i int) map[string]int { return pipeline.Expect(pipeline.Plan(i)) }

// ---------------------------------------------------------------------------

// runProgram runs a compiled block with docEnv and env.
func runProgram(t *testing.T, s *docSession, bin string, env ...string) (stdout, stderr string) {
	t.Helper()
	p := s.start(t, filepath.Dir(bin), strconv.Quote(bin), env...)
	if err := p.wait(s.ctx); err != nil {
		t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", bin, err, tail(p.out()), tail(p.errOut()))
	}
	return p.out(), p.errOut()
}

func readDoc(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), filepath.FromSlash(file)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func writeFile(dir, name, content string) error {
	return os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644)
}

// byRequestID keys request traces by omni.request.id.
func byRequestID(traces map[string][]traceview.Span) map[string][]traceview.Span {
	out := map[string][]traceview.Span{}
	for _, tr := range traces {
		if r := find(tr, "omni.request"); r != nil {
			out[r.Str("omni.request.id")] = tr
		}
	}
	return out
}

func find(ss []traceview.Span, name string) *traceview.Span {
	for i := range ss {
		if ss[i].Name == name {
			return &ss[i]
		}
	}
	return nil
}

func spanNames(ss []traceview.Span) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.Name)
	}
	sort.Strings(out)
	return out
}

func sortedCopy(ss []string) []string {
	out := append([]string(nil), ss...)
	sort.Strings(out)
	return out
}

func slicesSort(ss []string) { sort.Strings(ss) }

var interrupt = syscall.SIGINT

// processAlive reports whether pid runs (a zombie, which an init that does
// not reap would leave, has ended).
func processAlive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return syscall.Kill(pid, 0) == nil
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return !strings.HasPrefix(rest, "Z")
}
