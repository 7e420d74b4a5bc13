// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package jaeger

import (
	"context"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"
)

// TestJaegerSendsNoTracesOfItsOwn: a Jaeger of this package never exports
// traces of its own. They would go to the OTLP default endpoint, a port
// that belongs to whatever else runs on the machine, and Stop would wait
// on their export. The endpoint here is a listener of the test's: Jaeger
// must never connect to it, from its start to its stop.
func TestJaegerSendsNoTracesOfItsOwn(t *testing.T) {
	bin, err := Binary()
	if err != nil {
		if os.Getenv("OTELOMNI_REQUIRE_JAEGER") == "1" {
			t.Fatalf("Jaeger is required: %v", err)
		}
		t.Skipf("no Jaeger binary (run `make jaeger-bin`): %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	p, err := FreePorts()
	if err != nil {
		t.Fatal(err)
	}
	var conns atomic.Int64
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			c.Close()
		}
	}()
	j, err := startOn(context.Background(), bin, p, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + l.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	// A query Jaeger would trace; its end flushes what it traced.
	if _, err := j.Client().Search(context.Background(), "anything", time.Now().Add(-time.Hour), time.Now(), 10); err != nil {
		t.Fatal(err)
	}
	j.Stop()
	l.Close()
	<-accepted
	if n := conns.Load(); n > 0 {
		t.Errorf("Jaeger connected %d times to the OTLP endpoint of its environment: it exports traces of its own", n)
	}
}
