// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	_ "time/tzdata" // -tz names a zone even where the system has no database

	"go.opentelemetry.io/otel"

	"github.com/otelomni/otelomni/internal/plan"
	"github.com/otelomni/otelomni/internal/sanitize"
	"github.com/otelomni/otelomni/omnitrace/internal/omnirecord/emit"
	"github.com/otelomni/otelomni/omnitrace/internal/omnirecord/forms"
	"github.com/otelomni/otelomni/omnitrace/internal/omnirecord/input"
)

// maxLine bounds one line of input (a request of a hundred stages fits in
// a tenth of it); a longer one is reported and skipped unread.
const maxLine = input.MaxLine

// maxProblemLines bounds the problems printed per input; the rest are
// counted. A file of a million bad lines must not print a million lines.
const maxProblemLines = 100

// importFlags are import's options.
type importFlags struct {
	out, format, start, run, checkpoint, tz string
	follow                                  bool
	idle, poll                              time.Duration
	settle, maxPending                      int
}

func (f *importFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.out, "out", "", "write the traces to this OTLP/JSON file instead of exporting them")
	fs.StringVar(&f.format, "format", input.FormatAuto, fmt.Sprintf("the input's form, one of %v (auto tells it by content)", input.Formats))
	fs.StringVar(&f.start, "start", "", "place requests whose input has no time (a summary) from this RFC 3339 time (default: the file's modification time)")
	fs.StringVar(&f.run, "run", "", "a name for the run the input belongs to; it enters every trace id, so that runs reusing request ids stay apart")
	fs.StringVar(&f.tz, "tz", "UTC", "the time zone a log's times are read in, which its lines do not say: an IANA name (Asia/Tokyo), UTC, or an offset (+09:00)")
	fs.BoolVar(&f.follow, "follow", false, "keep reading FILE as it grows, across rotation, exporting each request once complete")
	fs.StringVar(&f.checkpoint, "checkpoint", "", "with -follow: resume from and save the position in this file")
	fs.DurationVar(&f.idle, "idle", 10*time.Second, "with -follow: export a request once no record of it came for this long")
	fs.DurationVar(&f.poll, "poll", 200*time.Millisecond, "with -follow: how often to look for more input")
	fs.IntVar(&f.settle, "settle", input.DefaultSettle, "records a finished request of a log waits for before it is exported")
	fs.IntVar(&f.maxPending, "max-pending", input.DefaultMaxPending, "requests of a log held at once (beyond, the oldest is exported, or dropped if unfinished), of inputs held for their other forms, and of a summary (beyond, it is read again in parts)")
}

func (f *importFlags) options() (input.Options, error) {
	o := input.Options{Format: f.format, RunName: sanitize.String(f.run, 256), Settle: f.settle, MaxPending: f.maxPending}
	if f.start != "" {
		t, err := time.Parse(time.RFC3339Nano, f.start)
		if err != nil {
			return o, usageError{fmt.Sprintf("-start %q is not an RFC 3339 time", sanitize.Display(f.start, 64))}
		}
		if t.Before(plan.MinTime) || t.After(plan.MaxTime) {
			// Year 1 would also read as no -start at all.
			return o, usageError{fmt.Sprintf("-start %q is outside the times a span can carry (1970 to 2262-04-11)", sanitize.Display(f.start, 64))}
		}
		o.Start = t
	}
	zone, err := parseZone(f.tz)
	if err != nil {
		return o, usageError{err.Error()}
	}
	o.Zone = zone
	if f.settle < 0 || f.maxPending < 0 {
		return o, usageError{"-settle and -max-pending are not negative"}
	}
	if f.settle == 0 {
		o.Settle = -1 // none: a finished request is exported at once
	}
	if f.poll <= 0 || f.idle <= 0 {
		return o, usageError{"-poll and -idle are longer than 0"}
	}
	return o, nil
}

// parseZone reads -tz: UTC, an offset from it ("+09:00", "-0530"), or a
// name of the time zone database ("Asia/Tokyo"). "Local", the machine's
// own zone, is refused: an import must not depend on where it runs.
func parseZone(s string) (*time.Location, error) {
	bad := func(why string) error {
		return fmt.Errorf("-tz %q: %s (an IANA name such as Asia/Tokyo, UTC, or an offset such as +09:00)", sanitize.Display(s, 64), why)
	}
	switch s {
	case "":
		return nil, bad("no zone")
	case "UTC", "Z":
		return time.UTC, nil
	case "Local":
		return nil, bad("the machine's own zone is never assumed: name it")
	}
	if s[0] == '+' || s[0] == '-' {
		// ±HH, ±HHMM or ±HH:MM.
		digits := s[1:]
		if len(digits) == 5 && digits[2] == ':' {
			digits = digits[:2] + digits[3:]
		}
		if len(digits) != 2 && len(digits) != 4 || strings.Trim(digits, "0123456789") != "" {
			return nil, bad("not an offset")
		}
		h, _ := strconv.Atoi(digits[:2])
		m := 0
		if len(digits) == 4 {
			m, _ = strconv.Atoi(digits[2:])
		}
		if m > 59 {
			return nil, bad("not an offset")
		}
		if h*60+m > 14*60 {
			return nil, bad("an offset beyond ±14:00")
		}
		sec := (h*60 + m) * 60
		if s[0] == '-' {
			sec = -sec
		}
		return time.FixedZone(s, sec), nil
	}
	if len(s) > 64 {
		return nil, bad("not a zone name")
	}
	loc, err := time.LoadLocation(s)
	if err != nil {
		return nil, bad("not a zone of the time zone database")
	}
	return loc, nil
}

func runImport(ctx context.Context, args []string, stdin io.Reader, stdout, stderrW io.Writer) int {
	// A reader or an exporter given up on after an interrupt may still
	// write: nothing reaches stderr once the import has returned.
	stderr := &closingWriter{w: stderrW}
	defer stderr.close()
	fs := flag.NewFlagSet("import", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var fl importFlags
	fl.register(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	opts, err := fl.options()
	if err == nil && fl.follow && (fs.NArg() != 1 || fs.Arg(0) == "-") {
		err = usageError{"-follow reads one file"}
	}
	if err == nil && fl.checkpoint != "" && !fl.follow {
		err = usageError{"-checkpoint goes with -follow"}
	}
	if err == nil && fl.out != "" {
		// Creating -out would empty an input of the same file.
		if out, serr := os.Stat(fl.out); serr == nil {
			for _, name := range fs.Args() {
				if in, serr := os.Stat(name); serr == nil && os.SameFile(in, out) {
					err = usageError{fmt.Sprintf("-out %s is one of the inputs", sanitize.Display(fl.out, 256))}
				}
			}
		}
	}
	if err == nil && fl.checkpoint != "" {
		// Saving the checkpoint would replace the file followed, or -out.
		if cp, serr := os.Stat(fl.checkpoint); serr == nil {
			for _, name := range append(fs.Args(), fl.out) {
				if other, serr := os.Stat(name); name != "" && serr == nil && os.SameFile(cp, other) {
					err = usageError{fmt.Sprintf("-checkpoint %s is the file followed, or -out", sanitize.Display(fl.checkpoint, 256))}
				}
			}
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "omnitrace import: %v\n%s", err, usage)
		return 2
	}
	otel.SetErrorHandler(boundedErrors(stderr))
	if os.Getenv("GOGC") == "" {
		// The import's live heap is small and bounded (one batch queue, a
		// bounded number of requests held), and most of its work is
		// short-lived spans: collecting less often costs a few MiB and
		// saves a fifth of the CPU.
		debug.SetGCPercent(300)
	}
	x, err := exportSetup(ctx, fl.out, stdout, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "omnitrace import: %s\n", sanitize.Display(err.Error(), 1024))
		return 1
	}
	if x.pipe == nil {
		fmt.Fprintln(stderr, "omnitrace import: the environment turns tracing off (OTEL_SDK_DISABLED or OTEL_TRACES_EXPORTER=none): nothing will be exported")
	}
	im := newImporter(ctx, x, stderr)
	// The reading, and then the export's end, run beside the watch for an
	// interrupt: an import stuck on a collector that never answers, or on
	// a stdin that never ends, still ends in bounded time when asked to.
	readDone := make(chan error, 1)
	go func() {
		if fl.follow {
			readDone <- follow(ctx, fs.Arg(0), fl, opts, im)
			return
		}
		names := inputOrder(fs.Args(), stderr)
		if len(names) > 1 {
			// The forms of one run, in several inputs, make one trace of
			// each request: see forms.MergeForms.
			im.join = input.NewJoiner(cmp.Or(fl.maxPending, input.DefaultMaxPending))
		}
		for i, name := range names {
			if ctx.Err() != nil {
				break
			}
			im.lastInput = i == len(names)-1
			if err := im.readFile(name, stdin, opts); err != nil {
				fmt.Fprintf(stderr, "omnitrace import: %s\n", sanitize.Display(err.Error(), 1024))
				im.mu.Lock()
				im.skipped++
				im.mu.Unlock()
			}
		}
		readDone <- nil
	}()
	select {
	case err = <-readDone:
	case <-ctx.Done():
		if fl.follow {
			// -follow stops its reading itself, and saves its checkpoint:
			// it is waited for.
			err = <-readDone
			break
		}
		select {
		case err = <-readDone:
		case <-time.After(interruptGrace):
			// The reader is stuck in a read (a stdin that never ends).
			fmt.Fprintln(stderr, "omnitrace import: interrupted while reading: the rest of the input is not read, and what was not yet exported is lost")
			return 1
		}
	}
	if !fl.follow {
		// The reading is over (or given up on above): what is held for
		// other forms is handed on, as anything read, even at an
		// interrupt (bounded: see hand).
		im.joinRest()
	}
	readErr := err != nil
	if readErr {
		// Said before the counts, which it explains.
		fmt.Fprintf(stderr, "omnitrace import: %s\n", sanitize.Display(err.Error(), 1024))
		var stop *checkpointError
		if errors.As(err, &stop) {
			stop.report(stderr)
		}
	}
	finished := make(chan int, 1)
	go func() { finished <- im.finish() }()
	var status int
	select {
	case status = <-finished:
	case <-ctx.Done():
		select {
		case status = <-finished:
		case <-time.After(shutdownTimeout + interruptGrace):
			fmt.Fprintf(stderr, "omnitrace import: interrupted: the exporter did not finish within %v; spans not yet exported are lost\n", shutdownTimeout+interruptGrace)
			return 1
		}
	}
	if ctx.Err() != nil && !fl.follow {
		fmt.Fprintln(stderr, "omnitrace import: interrupted: the rest of the input was not read")
		status = 1
	}
	if readErr {
		return 1
	}
	if !fl.follow && im.imported == 0 && im.skipped == 0 {
		// Nothing read was a record of any form: say so rather than
		// succeed silently.
		fmt.Fprintln(stderr, "omnitrace import: no request found in the input (see docs/omnitrace.md for the forms read, and -format)")
		return 1
	}
	return status
}

// inputOrder returns the inputs to read (stdin when none is named), each
// once: a file named twice, or stdin named twice, is read once, and said
// so. The smallest files are read first and stdin last: the requests of
// every input but the last are held until their other forms are read, and
// the largest input is then the one not held. What an import makes does
// not depend on the order (see forms.MergeForms).
func inputOrder(names []string, stderr io.Writer) []string {
	if len(names) == 0 {
		return []string{"-"}
	}
	type in struct {
		name string
		size int64
		fi   os.FileInfo
	}
	var ins []in
	stdin := false
	for _, name := range names {
		if name == "-" {
			if stdin {
				fmt.Fprintln(stderr, "omnitrace import: stdin (-) is named twice: read once")
			}
			stdin = true
			continue
		}
		fi, err := os.Stat(name)
		if err == nil {
			if j := slices.IndexFunc(ins, func(x in) bool { return x.fi != nil && os.SameFile(x.fi, fi) }); j >= 0 {
				if ins[j].name == name {
					fmt.Fprintf(stderr, "omnitrace import: %s is named twice: read once\n", sanitize.Display(name, 256))
				} else {
					fmt.Fprintf(stderr, "omnitrace import: %s is %s, named before: read once\n", sanitize.Display(name, 256), sanitize.Display(ins[j].name, 256))
				}
				continue
			}
		}
		x := in{name: name, fi: fi}
		if fi != nil {
			x.size = fi.Size()
		}
		ins = append(ins, x)
	}
	slices.SortStableFunc(ins, func(a, b in) int { return cmp.Compare(a.size, b.size) })
	out := make([]string, 0, len(ins)+1)
	for _, x := range ins {
		out = append(out, x.name)
	}
	if stdin {
		out = append(out, "-")
	}
	return out
}

// closingWriter writes to w until closed, then drops what comes.
type closingWriter struct {
	mu     sync.Mutex
	w      io.Writer
	closed bool
}

func (c *closingWriter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return len(p), nil
	}
	return c.w.Write(p)
}

func (c *closingWriter) close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
}

// shutdownTimeout bounds the export of what is queued when an import
// ends: long enough to flush a full batch to a live collector, short
// enough that a dead one never holds up the command's exit.
const shutdownTimeout = 5 * time.Second

// interruptGrace is how long an interrupted import waits for a reader or
// an exporter before it gives up on them.
const interruptGrace = time.Second

// maxSDKErrors bounds the lines the SDK's errors take on stderr.
const maxSDKErrors = 20

// boundedErrors prints the export's errors (and the OTLP clients' own)
// bounded in bytes and in number: a collector's 50 MB error page must not
// reach the terminal, nor a million failed batches a million lines.
func boundedErrors(w io.Writer) otel.ErrorHandler {
	var mu sync.Mutex
	n := 0
	return otel.ErrorHandlerFunc(func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if n++; n <= maxSDKErrors {
			fmt.Fprintf(w, "omnitrace import: %s\n", sanitize.Display(err.Error(), 512))
		} else if n == maxSDKErrors+1 {
			fmt.Fprintln(w, "omnitrace import: more export errors not shown")
		}
	})
}

// importer makes the spans of the requests of the inputs and counts.
// Requests are emitted by workers while the next lines are read: reading
// and emitting each take a core's worth of work per record.
type importer struct {
	ctx    context.Context
	x      *export
	stderr io.Writer

	work    chan emitJob
	stages  chan struct{} // a token a stage queued (see queuedStages)
	workers sync.WaitGroup

	// join merges the forms of one request read from several inputs; nil
	// with one input. lastInput: the input being read is the last. Both
	// are the reading goroutine's.
	join      *input.Joiner
	lastInput bool

	mu       sync.Mutex // guards what follows, written by the workers too
	name     string
	problems int
	imported int
	skipped  int
	late     int
	dropped  int
	// lateForms counts the parts of requests, in a later input, that came
	// after their request was handed on (more than -max-pending held).
	lateForms int
	leftOut   int
	// keysDropped counts the input's keys not kept as attributes, beyond
	// what a request or stage keeps.
	keysDropped int
	// notSent counts requests dropped at an interrupt, and givenUp says
	// the workers were given up on.
	notSent int
	// handed counts the requests handed to the workers.
	handed  int
	givenUp atomic.Bool
}

type emitJob struct {
	r      *forms.Request
	anchor time.Time
	// name is the input the request came from: a worker may emit it
	// after the next input began.
	name string
	// weight is what it takes of the queue: one, and one a stage.
	weight int
}

// Bounds of the requests waiting for a worker: at most queuedRequests,
// and queuedStages stages (a request of a thousand stages takes as much
// memory as a thousand requests of one).
const (
	queuedRequests = 256
	queuedStages   = 4096
)

func newImporter(ctx context.Context, x *export, stderr io.Writer) *importer {
	im := &importer{ctx: ctx, x: x, stderr: stderr,
		work: make(chan emitJob, queuedRequests), stages: make(chan struct{}, queuedStages)}
	for i := 0; i < max(1, min(runtime.GOMAXPROCS(0), 4)); i++ {
		em := emit.NewEmitter(x.limits, x.sample)
		var b *batch
		if x.pipe != nil {
			b = x.pipe.newBatch()
		}
		im.workers.Go(func() {
			for j := range im.work {
				im.emit(em, b, j)
				for range j.weight {
					<-im.stages
				}
			}
		})
	}
	return im
}

// Request hands one request to the workers, once its other forms, in the
// other inputs, are read.
func (im *importer) Request(r *forms.Request, anchor time.Time) {
	im.mu.Lock()
	name := im.name
	im.mu.Unlock()
	if im.join != nil && forms.Joins(r) {
		if !im.lastInput {
			for _, j := range im.join.Hold(r, anchor, name) {
				im.joined(j)
			}
			return
		}
		if j, ok := im.join.Take(r, anchor, name); ok {
			im.joined(j)
		}
		return
	}
	im.hand(emitJob{r, anchor, name, 0})
}

// joined reports what the forms of a merged request disagree on, and
// hands it to the workers.
func (im *importer) joined(j input.Joined) {
	if len(j.Notes) > 0 {
		im.mu.Lock()
		for _, n := range j.Notes {
			im.leftOut++
			im.reportAtLocked(j.Name, j.R.Line, fmt.Errorf("request %q: %s", sanitize.String(j.R.ID, 128), n), "")
		}
		im.mu.Unlock()
	}
	im.hand(emitJob{j.R, j.Anchor, j.Name, 0})
}

// joinRest hands on the requests still held for their other forms, once
// every input is read (or the reading was interrupted).
func (im *importer) joinRest() {
	if im.join == nil {
		return
	}
	for _, j := range im.join.Rest() {
		im.joined(j)
	}
	im.mu.Lock()
	im.lateForms = im.join.Late
	im.mu.Unlock()
}

// handedOn returns how many requests were handed to the workers.
func (im *importer) handedOn() int {
	im.mu.Lock()
	defer im.mu.Unlock()
	return im.handed
}

// hand hands one request to the workers.
func (im *importer) hand(j emitJob) {
	im.mu.Lock()
	im.handed++
	im.mu.Unlock()
	j.weight = min(1+len(j.r.Stages), queuedStages)
	if im.enqueue(j, im.ctx.Done()) {
		return
	}
	// Interrupted, with the workers stuck on an exporter that does not
	// keep up: wait a moment once, then drop and count, so that the
	// reading can stop and save where it is.
	if !im.givenUp.Load() {
		grace := make(chan struct{})
		t := time.AfterFunc(interruptGrace, func() { close(grace) })
		ok := im.enqueue(j, grace)
		t.Stop()
		if ok {
			return
		}
		im.givenUp.Store(true)
	}
	im.mu.Lock()
	im.notSent++
	im.mu.Unlock()
}

// enqueue waits for room for j, and hands it to the workers; false when
// stop comes first.
func (im *importer) enqueue(j emitJob, stop <-chan struct{}) bool {
	taken := 0
	undo := func() bool {
		for range taken {
			<-im.stages
		}
		return false
	}
	for taken < j.weight {
		select {
		case im.stages <- struct{}{}:
			taken++
		case <-stop:
			return undo()
		}
	}
	select {
	case im.work <- j:
		return true
	case <-stop:
		return undo()
	}
}

// emit emits one request into the worker's batch b (nil: tracing is off,
// and the request is only placed); a request that cannot be placed makes
// no span and is reported.
func (im *importer) emit(em *emit.Emitter, b *batch, j emitJob) {
	var err error
	if b != nil {
		err = b.emit(em, j.r, j.anchor)
	} else {
		err = em.Emit(j.r, j.anchor, nil)
	}
	im.mu.Lock()
	defer im.mu.Unlock()
	if err != nil {
		im.reportAtLocked(j.name, j.r.Line, fmt.Errorf("request %q: %w", sanitize.String(j.r.ID, 128), err), "; skipped")
		im.skipped++
		return
	}
	im.imported++
	im.keysDropped += j.r.KeysDropped()
}

// Problem reports a record that was skipped.
func (im *importer) Problem(line int, err error) {
	im.mu.Lock()
	defer im.mu.Unlock()
	if errors.Is(err, forms.ErrLeftOut) {
		// A field left out of a request that is still imported.
		im.leftOut += input.LeftOutFields(err)
		im.reportLocked(line, err, "")
		return
	}
	im.skipped++
	im.reportLocked(line, err, "; skipped")
}

// drain waits until every request handed on is emitted.
func (im *importer) drain() {
	close(im.work)
	im.workers.Wait()
}

func (im *importer) reportLocked(line int, err error, outcome string) {
	im.reportAtLocked(im.name, line, err, outcome)
}

// reportAtLocked reports a problem of input name at line (0: no line).
func (im *importer) reportAtLocked(name string, line int, err error, outcome string) {
	im.problems++
	if im.problems > maxProblemLines {
		return
	}
	// The name is said as a terminal shows it: its control characters as
	// '?', never as escapes the terminal would run.
	where := sanitize.Display(name, 256)
	if line > 0 {
		where = fmt.Sprintf("%s:%d", where, line)
	}
	fmt.Fprintf(im.stderr, "%s: %s%s\n", where, sanitize.Display(err.Error(), 512), outcome)
}

// readFile imports one file, or stdin for "-".
func (im *importer) readFile(name string, stdin io.Reader, opts input.Options) error {
	im.mu.Lock()
	im.name, im.problems = sanitize.String(name, 256), 0
	im.mu.Unlock()
	var r io.Reader = stdin
	var again io.ReaderAt
	ref := time.Now().UTC()
	if name == "-" {
		im.mu.Lock()
		im.name = "stdin"
		im.mu.Unlock()
	} else {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		defer f.Close()
		if st, err := f.Stat(); err == nil {
			ref = st.ModTime().UTC()
			if st.Mode().IsRegular() {
				again = f
			}
		}
		r = f
	}
	in, err := input.NewInput(ref, opts, im)
	if err != nil {
		return err
	}
	if again != nil {
		// A summary too large to hold is read again from the file, in
		// parts.
		in.ReadAgain(again)
	}
	lr := newLineReader(r)
	for im.ctx.Err() == nil { // an interrupt stops the reading
		line, off, tooLong, err := lr.next()
		if tooLong {
			in.SkipLine()
			im.Problem(lr.n, fmt.Errorf("line longer than %d bytes", maxLine))
		} else if line != nil {
			in.Line(line, off)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			in.End()
			return err
		}
	}
	in.End()
	im.noteStats(in)
	return nil
}

func (im *importer) noteStats(in *input.Input) {
	im.mu.Lock()
	defer im.mu.Unlock()
	late, dropped := in.Stats()
	im.late += late
	im.dropped += dropped
	if im.problems > maxProblemLines {
		fmt.Fprintf(im.stderr, "%s: %d more problems not shown\n", sanitize.Display(im.name, 256), im.problems-maxProblemLines)
	}
}

// finish flushes the exporter and reports; it returns the exit status: 1
// when a record was skipped or a span did not reach its destination.
func (im *importer) finish() int {
	im.drain()
	status := 0
	if im.late > 0 || im.dropped > 0 {
		fmt.Fprintf(im.stderr, "omnitrace import: %d records came after their request was exported (raise -settle), %d unfinished requests dropped (more than -max-pending held, or more than 64 MiB of their attributes)\n", im.late, im.dropped)
		status = 1
	}
	if im.lateForms > 0 {
		fmt.Fprintf(im.stderr, "omnitrace import: %d requests of a later input were left out: the same request of an earlier input was exported without them, more than -max-pending being held for their other forms (raise -max-pending)\n", im.lateForms)
		status = 1
	}
	dest := im.x.dest
	var l loss
	if p := im.x.pipe; p != nil {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(im.ctx), shutdownTimeout)
		var err error
		l, err = p.shutdown(ctx)
		cancel()
		if l.lost() > 0 {
			fmt.Fprintf(im.stderr, "omnitrace import: %d of %d spans did not reach %s (%d failed to export, %d dropped)\n",
				l.lost(), l.ended, dest, l.failed, l.dropped)
			status = 1
		}
		if err != nil {
			fmt.Fprintf(im.stderr, "omnitrace import: export: %s\n", sanitize.Display(err.Error(), 1024))
			status = 1
		}
	}
	if im.imported > 0 && im.x.pipe != nil && l.ended == 0 {
		// The environment's sampler kept nothing: say so, rather than
		// succeed with an empty destination.
		fmt.Fprintln(im.stderr, "omnitrace import: the sampler (OTEL_TRACES_SAMPLER) recorded none of the imported spans: nothing was exported")
		status = 1
	}
	leftOut := ""
	if im.leftOut > 0 {
		leftOut = fmt.Sprintf(", %d fields left out", im.leftOut)
	}
	if im.keysDropped > 0 {
		fmt.Fprintf(im.stderr, "omnitrace import: %d keys of the input were not kept as attributes (at most %d a request or stage, %d KiB a request): each span counts its own in %s\n",
			im.keysDropped, forms.MaxExtras, forms.MaxRequestBytes>>10, forms.DroppedKeysKey)
	}
	if im.notSent > 0 {
		fmt.Fprintf(im.stderr, "omnitrace import: interrupted: %d requests read were not exported (the exporter did not keep up)\n", im.notSent)
		status = 1
	}
	fmt.Fprintf(im.stderr, "omnitrace import: imported %d, skipped %d%s (to %s)\n", im.imported, im.skipped, leftOut, dest)
	if im.skipped > 0 || im.leftOut > 0 {
		status = 1
	}
	return status
}

// lineReader reads lines of any length up to maxLine, with their offsets.
type lineReader struct {
	br   *bufio.Reader
	off  int64
	n    int
	long []byte
}

func newLineReader(r io.Reader) *lineReader {
	return &lineReader{br: bufio.NewReaderSize(r, 256<<10)}
}

// next returns the next line without its line end, and the offset it
// starts at; a line longer than maxLine is drained and reported. The
// line is valid until the next call.
func (l *lineReader) next() ([]byte, int64, bool, error) {
	start := l.off
	l.long = l.long[:0]
	for {
		chunk, err := l.br.ReadSlice('\n')
		l.off += int64(len(chunk))
		if err == bufio.ErrBufferFull {
			if len(l.long)+len(chunk) <= maxLine {
				l.long = append(l.long, chunk...)
			} else {
				l.long = l.long[:maxLine+1]
			}
			continue
		}
		if len(l.long) > 0 {
			chunk = append(l.long, chunk...)
		}
		if len(chunk) == 0 && err != nil {
			return nil, start, false, err
		}
		l.n++
		if len(chunk) > maxLine+1 {
			return nil, start, true, err
		}
		line := chunk
		if n := len(line); n > 0 && line[n-1] == '\n' {
			line = line[:n-1]
		}
		if err == nil || err == io.EOF {
			return line, start, false, err
		}
		return line, start, false, err
	}
}
