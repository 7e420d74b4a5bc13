// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package emit

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"

	"github.com/otelomni/otelomni/omnitrace/internal/omnikeys"
	"github.com/otelomni/otelomni/spans"

	"github.com/otelomni/otelomni/omnitrace/internal/omnirecord/forms"
)

// keyed returns a request of stages stages, it and each stage carrying
// keys attributes of the input whose values are size bytes long.
func keyed(id string, stages, keys, size int) *forms.Request {
	extra := func(prefix string) []attribute.KeyValue {
		kv := make([]attribute.KeyValue, keys)
		for i := range kv {
			kv[i] = omnikeys.RecordKey(fmt.Sprintf("%s_%d", prefix, i)).String(strings.Repeat("v", size))
		}
		return kv
	}
	r := &forms.Request{ID: id, Source: "summary", Extra: extra("request"), Total: &forms.Measure{D: time.Second}}
	for s := range stages {
		r.Stages = append(r.Stages, forms.Stage{ID: s, Extra: extra("stage"),
			Durations: map[spans.Phase]time.Duration{spans.Exec: 10 * time.Millisecond, spans.Postprocess: time.Millisecond}})
	}
	return r
}

// TestSizeDoesNotUnderestimateTheSpans: what the emitter says the spans of
// a request take (which bounds the import's batches in bytes) is at least
// half of what they take of the heap, for spans light and heavy.
func TestSizeDoesNotUnderestimateTheSpans(t *testing.T) {
	for _, c := range []struct{ stages, keys, size int }{{1, 0, 0}, {1, 64, 8}, {3, 64, 1000}, {2, 10, 100}} {
		t.Run(fmt.Sprint(c), func(t *testing.T) {
			em := NewEmitter(defaultLimits, nil)
			var ms runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&ms)
			before := ms.HeapAlloc
			ss := ptrace.NewSpanSlice()
			estimate := 0
			for i := range 500 {
				// The request is garbage once emitted, as in an import: what
				// its spans keep of it is theirs.
				if err := em.Emit(keyed(fmt.Sprint("r", i), c.stages, c.keys, c.size), testAnchor, &ss); err != nil {
					t.Fatal(err)
				}
				estimate += em.Size()
			}
			runtime.GC()
			runtime.ReadMemStats(&ms)
			held := int(ms.HeapAlloc) - int(before)
			runtime.KeepAlive(ss)
			t.Logf("%d spans: %d bytes estimated, %d held", ss.Len(), estimate, held)
			if held > 2*estimate {
				t.Errorf("%d spans hold %d bytes of the heap, estimated at %d", ss.Len(), held, estimate)
			}
		})
	}
}
