// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

var (
	imageOnce sync.Once
	image     []byte // a dead journal holding ended and open spans
	imageUsed int    // bytes of it that hold anything
)

// deadImage returns the bytes of a small dead journal.
func deadImage(t testing.TB) ([]byte, int) {
	imageOnce.Do(func() {
		dir, err := os.MkdirTemp("", "journal-fuzz")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		j, err := Open(dir, WithSize(minSize))
		if err != nil {
			t.Fatal(err)
		}
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(j.SpanProcessor()))
		tr := tp.Tracer("fuzz", trace.WithInstrumentationVersion("1"))
		for i := range 12 {
			ctx, s := tr.Start(context.Background(), "span", trace.WithAttributes(everyValue("a.")[:1+i%6]...))
			_, c := tr.Start(ctx, "child", trace.WithLinks(trace.Link{SpanContext: s.SpanContext()}))
			c.AddEvent("e", trace.WithAttributes(attribute.Int("n", i)))
			c.End()
			if i%3 != 0 {
				s.End()
			}
		}
		j.die()
		image, err = os.ReadFile(j.Path())
		if err != nil {
			t.Fatal(err)
		}
		g := geometryFor(minSize)
		imageUsed = g.segOff(0) + 16<<10
	})
	return image, imageUsed
}

// FuzzRecover damages a dead journal at the offsets the input names (five
// bytes a patch: a little-endian offset into the used part, a byte) and
// recovers it: never a panic, never a span twice, every span marked
// recovered and ending no earlier than it starts.
func FuzzRecover(f *testing.F) {
	img, used := deadImage(f)
	g := geometryFor(minSize)
	for _, off := range []int{0, hdrVersion, hdrHeartbeat, g.defsOff() + 3, g.defsOff() + 40, g.segOff(0), g.segOff(0) + segHeaderSize + 2, g.segOff(0) + 300, g.segOff(0) + 2000} {
		f.Add(binary.LittleEndian.AppendUint32(nil, uint32(off)), byte(0xff))
	}
	f.Add([]byte{}, byte(0))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, offs []byte, v byte) {
		b := append([]byte(nil), img...)
		for i := 0; i+4 <= len(offs); i += 4 {
			off := int(binary.LittleEndian.Uint32(offs[i:])) % used
			b[off] ^= v | 1
		}
		if len(offs)%4 == 1 { // and a cut
			b = b[:int(offs[len(offs)-1])*len(b)/256]
		}
		p := filepath.Join(dir, "fuzz"+suffix)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(p)
		exp := &memExporter{}
		rep, err := Recover(context.Background(), dir, exp)
		if err != nil && rep.Unreadable != 1 {
			t.Fatalf("%v with %+v", err, rep)
		}
		seen := map[[8]byte]bool{}
		for _, s := range exp.stubs() {
			id := [8]byte(s.SpanContext.SpanID())
			if seen[id] {
				t.Fatalf("span %x twice", id)
			}
			seen[id] = true
			if !hasAttr(s.Attributes, RecoveredKey.Bool(true)) || s.EndTime.Before(s.StartTime) || !s.SpanContext.IsValid() {
				t.Fatalf("recovered %+v", s)
			}
		}
		if rep.Ended+rep.Open != len(seen) {
			t.Fatalf("report %+v, %d spans", rep, len(seen))
		}
	})
}

// FuzzDecode: any payload decodes to a record or an error, never a panic.
func FuzzDecode(f *testing.F) {
	img, used := deadImage(f)
	g := geometryFor(minSize)
	scan(img[:used], g.segOff(0)+segHeaderSize, firstGen, g.maxPayload(), func(_ int, p []byte, _ bool) {
		f.Add(append([]byte(nil), p...))
	})
	scan(img[g.defsOff():g.segOff(0)], 0, defsGen, g.maxPayload(), func(_ int, p []byte, _ bool) {
		f.Add(append([]byte(nil), p...))
	})
	f.Fuzz(func(t *testing.T, p []byte) {
		_, _ = decodeSpan(p)
		_, _ = decodeDefinition(p)
		scan(p, 0, firstGen, len(p), func(int, []byte, bool) {})
	})
}
