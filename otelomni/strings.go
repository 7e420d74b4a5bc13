package otelomni

import (
	"go.opentelemetry.io/otel/attribute"

	"github.com/otelomni/otelomni/internal/sanitize"
)

// str returns s valid and bounded by the value limit, counting a repair.
// The common case, a short valid string, costs one scan and no allocation.
func (in *Instrumenter) str(s string) string {
	return in.strMax(s, in.cfg.valueMax)
}

func (in *Instrumenter) strMax(s string, max int) string {
	if sanitize.Valid(s, max) {
		return s
	}
	in.stats.repairedString()
	return sanitize.String(s, max)
}

// kvs returns kv with every key and string value valid and bounded; kv
// itself when nothing needs repair. The caller's slice is never written to.
func (in *Instrumenter) kvs(kv []attribute.KeyValue) []attribute.KeyValue {
	out := sanitize.KeyValues(kv, maxKeyBytes, in.cfg.valueMax)
	if len(kv) > 0 && &out[0] != &kv[0] {
		in.stats.repairedString()
	}
	return out
}
