// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Hooks for the end-to-end tests and the crash demo, read by this example
// only (never by otelomni or otelsetup):
//
//	OTELOMNI_EXAMPLE_SPAN_FD=N    write "S <trace id> <span id>\n" to file
//	                              descriptor N as each span starts, after
//	                              the crash journal has recorded it
//	OTELOMNI_EXAMPLE_DIE=HOW:K    die as the K-th denoising loop (forward
//	                              span) starts, mid-request: HOW is kill
//	                              (SIGKILL, as the OOM killer sends),
//	                              panic (an unrecovered panic on another
//	                              goroutine) or fatal (fatal error:
//	                              concurrent map writes); no deferred call
//	                              runs
const (
	spanFDEnv = "OTELOMNI_EXAMPLE_SPAN_FD"
	dieEnv    = "OTELOMNI_EXAMPLE_DIE"
)

// hooks is the span processor of the hooks; nil when none is set.
type hooks struct {
	mu  sync.Mutex
	out *os.File

	die      string
	dieAt    int64
	forwards atomic.Int64
}

func newHooks() (*hooks, error) {
	h := &hooks{}
	if v := os.Getenv(spanFDEnv); v != "" {
		fd, err := strconv.Atoi(v)
		if err != nil || fd < 3 {
			return nil, fmt.Errorf("%s=%q: want a file descriptor of 3 or more", spanFDEnv, v)
		}
		h.out = os.NewFile(uintptr(fd), "spans")
	}
	if v := os.Getenv(dieEnv); v != "" {
		how, k, _ := strings.Cut(v, ":")
		n, err := strconv.ParseInt(k, 10, 64)
		if err != nil || n < 1 || (how != "kill" && how != "panic" && how != "fatal") {
			return nil, fmt.Errorf("%s=%q: want kill, panic or fatal, a colon and a count from 1", dieEnv, v)
		}
		h.die, h.dieAt = how, n
	}
	if h.out == nil && h.die == "" {
		return nil, nil
	}
	return h, nil
}

func (h *hooks) OnStart(_ context.Context, s sdktrace.ReadWriteSpan) {
	if h.out != nil {
		sc := s.SpanContext()
		h.mu.Lock()
		// One write(2) a line: what the reader has read, the journal had.
		_, _ = h.out.WriteString("S " + sc.TraceID().String() + " " + sc.SpanID().String() + "\n")
		h.mu.Unlock()
	}
	if h.die != "" && s.Name() == "omni.diffusion.forward" && h.forwards.Add(1) == h.dieAt {
		h.dieNow()
	}
}

// dieNow ends the process as h.die says, without running a deferred call.
func (h *hooks) dieNow() {
	switch h.die {
	case "kill":
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	case "panic":
		go func() { panic("simulated engine fault on another goroutine") }()
	case "fatal":
		m := map[int]int{}
		for g := range 4 {
			go func() {
				for i := 0; ; i++ {
					m[i%64] = g
				}
			}()
		}
		go func() {
			// Should the runtime not catch the race at once.
			time.Sleep(10 * time.Second)
			var mu sync.Mutex
			mu.Unlock()
		}()
	}
	// The request goes on until the process dies: no deferred call of
	// main's runs.
}

func (*hooks) OnEnd(sdktrace.ReadOnlySpan)      {}
func (*hooks) Shutdown(context.Context) error   { return nil }
func (*hooks) ForceFlush(context.Context) error { return nil }
