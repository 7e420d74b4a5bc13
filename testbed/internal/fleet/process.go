// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package fleet

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// startupDeadline bounds how long a collector or backend may take to become
// healthy; a failure deadline, generous for a machine whose cores are busy.
const startupDeadline = 90 * time.Second

// process is one collector binary (Jaeger is one) run with a shipped
// configuration; it prints into a log file in its own folder.
type process struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	stop sync.Once
}

// startProcess runs bin with config, the environment variables in env on
// top of this process's environment less its OTEL_* variables (the binary
// traces itself with the OpenTelemetry SDK and would take a test's
// settings), and waits until every URL in ready answers 200.
func startProcess(ctx context.Context, name, bin, config, logDir string, env map[string]string, ready ...string) (*process, error) {
	return startCommand(ctx, name, bin, []string{"--config", "file:" + config}, logDir, env, ready...)
}

// startCommand is startProcess with the command's arguments given.
func startCommand(ctx context.Context, name, bin string, args []string, logDir string, env map[string]string, ready ...string) (*process, error) {
	logPath := filepath.Join(logDir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	p := &process{name: name, log: logPath, done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OTEL_") {
			p.cmd.Env = append(p.cmd.Env, kv)
		}
	}
	for k, v := range env {
		p.cmd.Env = append(p.cmd.Env, k+"="+v)
	}
	p.cmd.Stdout, p.cmd.Stderr = f, f
	// Its own process group, so that Stop reaches it alone.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: starting %s: %w", name, bin, err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()

	deadline := time.Now().Add(startupDeadline)
	for !allOK(ready) {
		select {
		case <-p.done:
			return nil, fmt.Errorf("%s exited during start-up:\n%s", name, p.Logs())
		case <-ctx.Done():
			p.Stop()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.Stop()
			return nil, fmt.Errorf("%s not healthy after %v:\n%s", name, startupDeadline, p.Logs())
		}
	}
	return p, nil
}

func allOK(urls []string) bool {
	c := http.Client{Timeout: time.Second}
	for _, u := range urls {
		resp, err := c.Get(u)
		if err != nil {
			return false
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return false
		}
	}
	return true
}

// Stop stops the process (SIGTERM, then SIGKILL after 20 s) and waits for
// it. It is safe to call more than once.
func (p *process) Stop() {
	p.stop.Do(func() {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(20 * time.Second):
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
	})
}

// Exited is closed when the process has exited.
func (p *process) Exited() <-chan struct{} { return p.done }

// maxLog bounds what Logs returns: enough to diagnose, never unbounded.
const maxLog = 64 << 10

// Logs returns the end of what the process printed.
func (p *process) Logs() string {
	f, err := os.Open(p.log)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > maxLog {
		_, _ = f.Seek(-maxLog, io.SeekEnd)
	}
	b, _ := io.ReadAll(io.LimitReader(f, maxLog))
	return string(b)
}

// Pid is the process id.
func (p *process) Pid() int { return p.cmd.Process.Pid }

// LogPath is the file the process prints into.
func (p *process) LogPath() string { return p.log }

// freeAddrs picks n free loopback addresses. A port can be taken between
// choosing it and binding it; the callers retry a failed start.
func freeAddrs(n int) ([]string, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	out := make([]string, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		out = append(out, l.Addr().String())
	}
	return out, nil
}
