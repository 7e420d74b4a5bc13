// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

// The docs' examples are tests: every fenced code block of README.md and
// docs/*.md is extracted from the Markdown itself and is, by its entry in
// docsInventory (docs_inventory_test.go), either
//
//   - run: a shell block's commands, each exactly as written in a fresh
//     clone of this working tree (the only change: the port of a collector
//     endpoint, moved to the test's, see TestDocsShellBlocks's rewrites),
//     with the outcome the text states checked;
//   - compiled: every ```go block, and run where it claims an outcome;
//   - checked: a TraceQL query or a span-tree diagram, against the spans
//     the examples really export;
//   - covered: not run here, with the reason and the tests that show what
//     it says.
//
// TestDocsInventory fails on a block without an entry, on an entry whose
// block is gone or no longer holds its anchor text, and on a covering test
// that does not exist.
//
// How a ```go block is compiled: each block is a package main of its own.
//   - A block that begins with `package` is compiled as it is.
//   - A block with top-level declarations (func, type, var, const, import)
//     is a file: `package main` goes first, then, unless the block has an
//     import declaration of its own (then it must list every import it
//     uses), the imports of docGoImports.
//   - Any other block is the body of a function, docBlock, in such a file.
// The names a block leaves to the reader (serve, loadWeights, ...) are
// declared by its entry's `given`, a second file of the package; a given
// without func main gets an empty one. Compile errors name the Markdown
// file and line.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode"

	"github.com/otelomni/otelomni/omnitrace/traceview"
	"github.com/otelomni/otelomni/testbed/internal/fleet"
	"github.com/otelomni/otelomni/testbed/internal/jaeger"
)

// docFiles are the Markdown files whose blocks the inventory covers:
// README.md and every file in docs/.
func docFiles(t *testing.T, root string) []string {
	t.Helper()
	files := []string{"README.md"}
	more, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range more {
		files = append(files, "docs/"+filepath.Base(f))
	}
	return files
}

// docBlock is one fenced code block of a Markdown file.
type docBlock struct {
	file string // slash-separated, from the repository root
	// key is file#heading/n: the block is the n-th under the nearest
	// heading above it (its anchor, as GitHub makes it).
	key  string
	lang string // the first word of the fence's info string
	line int    // the line of the block's first line of content
	text string
}

// readBlocks returns every fenced code block of the files, in order.
func readBlocks(t *testing.T, root string, files []string) []docBlock {
	t.Helper()
	var all []docBlock
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(f)))
		if err != nil {
			t.Fatal(err)
		}
		blocks, err := parseBlocks(f, string(b))
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, blocks...)
	}
	return all
}

var headingRe = regexp.MustCompile(`^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$`)

// parseBlocks finds the fenced code blocks (``` or ~~~, CommonMark's rules
// for opening and closing) of one Markdown file.
func parseBlocks(file, md string) ([]docBlock, error) {
	var out []docBlock
	heading := ""
	perHeading := map[string]int{}
	lines := strings.Split(md, "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		trimmed := strings.TrimLeft(line, " \t")
		indent := len(line) - len(trimmed)
		fence := ""
		for _, c := range []string{"```", "~~~"} {
			if strings.HasPrefix(trimmed, c) {
				n := len(trimmed) - len(strings.TrimLeft(trimmed, c[:1]))
				fence = strings.Repeat(c[:1], n)
			}
		}
		if fence == "" {
			if m := headingRe.FindStringSubmatch(line); m != nil {
				heading = anchor(m[1])
			}
			continue
		}
		info := strings.TrimSpace(trimmed[len(fence):])
		lang, _, _ := strings.Cut(info, " ")
		start := i + 1
		var body []string
		closed := false
		for i++; i < len(lines); i++ {
			l := lines[i]
			tl := strings.TrimLeft(l, " \t")
			if strings.HasPrefix(tl, fence) && strings.TrimSpace(strings.TrimLeft(tl, fence[:1])) == "" {
				closed = true
				break
			}
			// Content lines lose the fence's own indentation.
			for k := 0; k < indent && strings.HasPrefix(l, " "); k++ {
				l = l[1:]
			}
			body = append(body, l)
		}
		if !closed {
			return nil, fmt.Errorf("%s:%d: a code block that never closes", file, start)
		}
		perHeading[heading]++
		out = append(out, docBlock{
			file: file,
			key:  fmt.Sprintf("%s#%s/%d", file, heading, perHeading[heading]),
			lang: lang,
			line: start + 1,
			text: strings.Join(body, "\n") + "\n",
		})
	}
	return out, nil
}

// anchor is the id GitHub gives a heading: lower case, punctuation other
// than - and _ dropped, spaces as -.
func anchor(h string) string {
	h = strings.ReplaceAll(h, "`", "")
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// docEntry says what the harness does with one block.
type docEntry struct {
	key string
	// contains is text the block must hold, so that an entry cannot
	// silently follow another block to its key.
	contains string

	// A shell block (```sh): one cmd per command of the block, in order.
	cmds []docCmd
	// A ```go block: always compiled; see goExample.
	goex *goExample
	// check checks the block (a TraceQL query, a diagram, an input a
	// page shows) against the spans the block with key after exported
	// when it ran, or against what the tools that block's session built
	// make of it.
	check func(t *testing.T, s *docSession, b docBlock, ss []traceview.Span)
	after string
	// checkedBy is the key of the entry whose run checks this block (a
	// diagram of what a ```go block makes, the output a command prints).
	checkedBy string
	// covered: not run here.
	covered *docCover
}

// docCover is a block that is not run here: why, and the tests that show
// what it says.
type docCover struct {
	reason string
	tests  []string
	// untestable: no test of this repository can show it (a third party's
	// configuration); it names no test.
	untestable bool
}

// docCmd handles one command of a shell block: the command must begin with
// prefix; run runs it (through docSession.start or .run, which apply the
// session's rewrites and nothing else) and checks its outcome, or covered
// says why it is not run.
type docCmd struct {
	prefix  string
	run     func(t *testing.T, s *docSession, c string)
	covered *docCover
}

// goExample is what a ```go block needs beyond its own text.
type goExample struct {
	// given is a Go file of package main (without the package clause)
	// declaring what the block leaves to the reader.
	given string
	// run runs the compiled program and checks what the block says it
	// does. A block that is compiled only names in outcome the tests that
	// show what it does.
	run     func(t *testing.T, s *docSession, bin string)
	outcome []string
	// record runs a statement block with a span recorder (recorderGiven).
	record bool
}

// TestDocsInventory checks that every block of the docs has exactly one
// entry, that each entry still finds its block, and that each test named
// as covering a block exists.
func TestDocsInventory(t *testing.T) {
	root := repoRoot(t)
	blocks := readBlocks(t, root, docFiles(t, root))
	if len(blocks) == 0 {
		t.Fatal("no code blocks found in the docs")
	}
	checkInventory(t, root, blocks, docsInventory())
}

func checkInventory(t *testing.T, root string, blocks []docBlock, inv []docEntry) {
	t.Helper()
	byKey := map[string]docBlock{}
	for _, b := range blocks {
		byKey[b.key] = b
	}
	entries := map[string]bool{}
	tests := testNames(t, root)
	for _, e := range inv {
		if entries[e.key] {
			t.Errorf("%s: two entries", e.key)
		}
		entries[e.key] = true
		b, ok := byKey[e.key]
		if !ok {
			t.Errorf("%s: the inventory has an entry, the docs no such block (moved or removed? update docsInventory)", e.key)
			continue
		}
		if e.contains == "" || !strings.Contains(b.text, e.contains) {
			t.Errorf("%s (%s:%d): the block does not hold %q: the inventory follows the wrong block", e.key, b.file, b.line, e.contains)
		}
		kinds := 0
		for _, set := range []bool{e.cmds != nil, e.goex != nil, e.check != nil, e.checkedBy != "", e.covered != nil} {
			if set {
				kinds++
			}
		}
		if kinds != 1 {
			t.Errorf("%s: an entry must be one of cmds, goex, check, checkedBy, covered; it is %d", e.key, kinds)
		}
		switch {
		case b.lang == "go" && e.goex == nil:
			t.Errorf("%s: a ```go block is compiled: its entry needs goex", e.key)
		case b.lang != "go" && e.goex != nil:
			t.Errorf("%s: goex on a %q block", e.key, b.lang)
		case (b.lang == "sh" || b.lang == "console") && e.cmds == nil && e.covered == nil:
			t.Errorf("%s: a shell block is run (cmds) or covered", e.key)
		case e.cmds != nil && b.lang != "sh" && b.lang != "console":
			t.Errorf("%s: cmds on a %q block", e.key, b.lang)
		}
		if e.cmds != nil {
			cmds := shellCommands(b.lang, b.text)
			if len(cmds) != len(e.cmds) {
				t.Errorf("%s: the block has %d commands, its entry %d: each command is run or covered", e.key, len(cmds), len(e.cmds))
			}
			for i := range min(len(cmds), len(e.cmds)) {
				if !strings.HasPrefix(cmds[i], e.cmds[i].prefix) || e.cmds[i].prefix == "" {
					t.Errorf("%s: command %d is %q, its entry expects one beginning %q", e.key, i+1, cmds[i], e.cmds[i].prefix)
				}
				if (e.cmds[i].run == nil) == (e.cmds[i].covered == nil) {
					t.Errorf("%s: command %d: run or covered, exactly one", e.key, i+1)
				}
				checkCover(t, e.key, e.cmds[i].covered, tests)
			}
		}
		if e.check != nil {
			a := entryFor(inv, e.after)
			if a == nil || a.cmds == nil && (a.goex == nil || a.goex.run == nil) {
				t.Errorf("%s: checked after %q, which is not a block that runs", e.key, e.after)
			}
		}
		if e.checkedBy != "" {
			if c := entryFor(inv, e.checkedBy); c == nil || (c.goex == nil || c.goex.run == nil) && !runsACommand(c) {
				t.Errorf("%s: checked by %s, which is not a block that runs", e.key, e.checkedBy)
			}
		}
		if e.goex != nil {
			if e.goex.run == nil && len(e.goex.outcome) == 0 {
				t.Errorf("%s: a ```go block that is not run names the tests that show its outcome", e.key)
			}
			for _, name := range e.goex.outcome {
				if !tests[name] {
					t.Errorf("%s: names %s, which is not a test of this repository", e.key, name)
				}
			}
		}
		checkCover(t, e.key, e.covered, tests)
	}
	for _, b := range blocks {
		if !entries[b.key] {
			t.Errorf("%s:%d: a ```%s block without an entry in docsInventory (key %q): run it, compile it, check it or say which test covers it",
				b.file, b.line, b.lang, b.key)
		}
	}
}

// runsACommand reports whether a shell block's entry runs a command.
func runsACommand(e *docEntry) bool {
	for _, c := range e.cmds {
		if c.run != nil {
			return true
		}
	}
	return false
}

func checkCover(t *testing.T, key string, c *docCover, tests map[string]bool) {
	t.Helper()
	if c == nil {
		return
	}
	if c.reason == "" {
		t.Errorf("%s: covered without a reason", key)
	}
	if (len(c.tests) == 0) != c.untestable {
		t.Errorf("%s: covered names the tests that show it, or is untestable and names none", key)
	}
	for _, name := range c.tests {
		if !tests[name] {
			t.Errorf("%s: names %s, which is not a test of this repository", key, name)
		}
	}
}

func entryFor(inv []docEntry, key string) *docEntry {
	for i := range inv {
		if inv[i].key == key {
			return &inv[i]
		}
	}
	return nil
}

// ciTest names what is not a Go test: CI runs `make test` (.ci/run).
const ciTest = "make test (.ci/run)"

var testFuncRe = regexp.MustCompile(`(?m)^func ((?:Test|Example|Benchmark|Fuzz)\w*)\(`)

// testNames returns the names of every test, example, benchmark and fuzz
// target in the repository's _test.go files, and ciTest.
func testNames(t *testing.T, root string) map[string]bool {
	t.Helper()
	names := map[string]bool{ciTest: true}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "bin" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range testFuncRe.FindAllStringSubmatch(string(b), -1) {
			names[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// shellCommands splits a shell block into its commands: a line ending in a
// backslash continues on the next; blank lines and lines that are only a
// comment are not commands. In a ```console block only the lines after a
// "$ " prompt are commands (the others are what they print).
func shellCommands(lang, text string) []string {
	var out []string
	cur := ""
	for _, line := range strings.Split(text, "\n") {
		if cur == "" && lang == "console" {
			cmd, ok := strings.CutPrefix(line, "$ ")
			if !ok {
				continue
			}
			line = cmd
		}
		if cur == "" && (strings.TrimSpace(line) == "" || strings.HasPrefix(strings.TrimSpace(line), "#")) {
			continue
		}
		if strings.HasSuffix(line, "\\") {
			cur += line + "\n"
			continue
		}
		cur += line
		out = append(out, cur)
		cur = ""
	}
	if cur != "" {
		out = append(out, cur)
	}
	return out
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := jaeger.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// ---------------------------------------------------------------------------
// The workspace: a fresh clone of this working tree.

// docWorkspace is where the docs' commands run: a snapshot of the working
// tree (every file git tracks or would track, as it is now) committed to a
// repository of its own, and the clone of it that the docs' first command
// (`git clone <this repository> && cd otelomni`) makes.
type docWorkspace struct {
	src, run, clone string
	// cloneCmd is that first command, as run.
	cloneCmd string
	err      error
}

var (
	workspaceOnce sync.Once
	workspace     docWorkspace
)

// cloneBlockKey is the block whose first command makes the clone.
const cloneBlockKey = "docs/getting-started.md#1-see-it-without-any-server/1"

// theWorkspace makes the workspace once for all the tests.
func theWorkspace(t *testing.T) *docWorkspace {
	t.Helper()
	workspaceOnce.Do(func() { workspace.err = workspace.make(t) })
	if workspace.err != nil {
		t.Fatalf("the docs' workspace: %v", workspace.err)
	}
	return &workspace
}

func (w *docWorkspace) make(t *testing.T) error {
	root := repoRoot(t)
	base := filepath.Join(workDir, "docs")
	w.src = filepath.Join(base, "src", "otelomni")
	w.run = filepath.Join(base, "run")
	for _, d := range []string{w.src, w.run} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	names, err := treeFiles(root)
	if err != nil {
		return err
	}
	for _, name := range names {
		from := filepath.Join(root, name)
		st, err := os.Lstat(from)
		if err != nil || !st.Mode().IsRegular() {
			continue // deleted in the working tree, or not a file
		}
		b, err := os.ReadFile(from)
		if err != nil {
			return err
		}
		to := filepath.Join(w.src, name)
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(to, b, st.Mode().Perm()); err != nil {
			return err
		}
	}
	git := []string{"-c", "init.defaultBranch=main", "-c", "user.name=docs", "-c", "user.email=docs@example.invalid", "-c", "commit.gpgsign=false"}
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"commit", "-q", "-m", "the working tree"}} {
		c := exec.Command("git", append(git, args...)...)
		c.Dir = w.src
		if out, err := c.CombinedOutput(); err != nil {
			return fmt.Errorf("git %s: %v\n%s", args[0], err, out)
		}
	}

	// The docs' own clone command, from the block that shows it.
	blocks := readBlocks(t, root, []string{"docs/getting-started.md"})
	var cmds []string
	for _, b := range blocks {
		if b.key == cloneBlockKey {
			cmds = shellCommands(b.lang, b.text)
		}
	}
	if len(cmds) == 0 || !strings.Contains(cmds[0], "<this repository>") {
		return fmt.Errorf("%s: no `git clone <this repository>` command", cloneBlockKey)
	}
	w.cloneCmd = cmds[0]
	// `&& cd otelomni` is the shell's; the clone's directory is what it names.
	clone, _, _ := strings.Cut(w.cloneCmd, "&&")
	c := exec.Command("bash", "-c", strings.ReplaceAll(clone, "<this repository>", w.src))
	c.Dir = w.run
	c.Env = docEnv()
	if out, err := c.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %v\n%s", w.cloneCmd, err, out)
	}
	m := regexp.MustCompile(`&&\s*cd\s+(\S+)`).FindStringSubmatch(w.cloneCmd)
	if m == nil {
		return fmt.Errorf("%q does not cd into the clone", w.cloneCmd)
	}
	w.clone = filepath.Join(w.run, m[1])
	if _, err := os.Stat(filepath.Join(w.clone, "Makefile")); err != nil {
		return fmt.Errorf("%q: %w", w.cloneCmd, err)
	}

	// Jaeger as `make test` leaves it: built once, tools/bin/jaeger newer
	// than the tools module's files (make would rebuild it otherwise).
	bin, err := jaeger.Binary()
	if err != nil {
		return err
	}
	st, err := os.Stat(bin)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(w.clone, "tools", "bin"), 0o755); err != nil {
		return err
	}
	abs, err := filepath.Abs(bin)
	if err != nil {
		return err
	}
	if err := os.Symlink(abs, filepath.Join(w.clone, "tools", "bin", "jaeger")); err != nil {
		return err
	}
	old := st.ModTime().Add(-time.Second)
	for _, f := range []string{"go.mod", "go.sum"} {
		if err := os.Chtimes(filepath.Join(w.clone, "tools", f), old, old); err != nil {
			return err
		}
	}
	// The tier's collector likewise, newer than its module's files.
	col, err := fleet.CollectorBinary()
	if err != nil {
		return err
	}
	if col, err = filepath.Abs(col); err != nil {
		return err
	}
	if st, err = os.Stat(col); err != nil {
		return err
	}
	if err := os.Symlink(col, filepath.Join(w.clone, "tools", "bin", "otelcol")); err != nil {
		return err
	}
	old = st.ModTime().Add(-time.Second)
	for _, f := range []string{"go.mod", "go.sum", "main.go"} {
		if err := os.Chtimes(filepath.Join(w.clone, "tools", "otelcol", f), old, old); err != nil {
			return err
		}
	}
	return nil
}

// treeFiles lists the working tree's files, relative to root: what git
// tracks or would track; outside a git checkout (an unpacked archive),
// every file but .git and what the build puts in bin directories.
func treeFiles(root string) ([]string, error) {
	ls := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	ls.Dir = root
	if list, err := ls.Output(); err == nil {
		return strings.Split(strings.TrimRight(string(list), "\x00"), "\x00"), nil
	}
	var names []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() && (rel == ".git" || rel == "bin" || rel == "tools/bin") {
			return filepath.SkipDir
		}
		if !d.IsDir() {
			names = append(names, rel)
		}
		return nil
	})
	return names, err
}

// docEnv is a reader's environment: this process's, without any OTEL_*
// variable (a developer's own settings must not change what a command
// sends where) and without make's variables from a `make test` above.
func docEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "OTEL_") || k == "MAKEFLAGS" || k == "MAKELEVEL" || k == "MFLAGS" {
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

// ---------------------------------------------------------------------------
// Running commands.

// docSession is what the blocks' runs share: the workspace, one Jaeger,
// the spans the examples exported there, and the processes still running.
type docSession struct {
	ws     *docWorkspace
	ctx    context.Context
	jaeger *jaeger.Jaeger
	// rewrites are the only changes made to a command before it runs.
	rewrites []rewrite
	// spans holds what each block's run exported, by the block's key, for
	// the queries and diagrams; key is the block running.
	spans map[string][]traceview.Span
	key   string
	// state carries what one block leaves for a later one (a Jaeger kept
	// running, and how to query it).
	state map[string]any
	procs []*docProc
}

type rewrite struct{ from, to string }

// rewritten returns the command with the session's rewrites applied.
func (s *docSession) rewritten(c string) string {
	for _, r := range s.rewrites {
		c = strings.ReplaceAll(c, r.from, r.to)
	}
	return c
}

// docProc is a command started through bash, in a process group of its
// own, with its output in files (so that a job it leaves in the background
// cannot hold a pipe open).
type docProc struct {
	cmd            *exec.Cmd
	text           string
	stdout, stderr *os.File
	done           chan struct{}
	err            error
}

// start starts command c as written (after the rewrites) with bash in dir
// (the clone when empty), with docEnv and extra.
func (s *docSession) start(t *testing.T, dir, c string, extra ...string) *docProc {
	t.Helper()
	if dir == "" {
		dir = s.ws.clone
	}
	text := s.rewritten(c)
	if m := fixedPort.FindString(text); m != "" {
		t.Fatalf("%s: would reach %s, a port other programs may hold: add a rewrite", text, m)
	}
	if text != c {
		t.Logf("running (rewritten): %s", text)
	} else {
		t.Logf("running: %s", text)
	}
	p := &docProc{text: text, done: make(chan struct{})}
	var err error
	outDir := t.TempDir()
	if p.stdout, err = os.Create(filepath.Join(outDir, "stdout")); err != nil {
		t.Fatal(err)
	}
	if p.stderr, err = os.Create(filepath.Join(outDir, "stderr")); err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command("bash", "-c", text)
	p.cmd.Dir = dir
	p.cmd.Env = docEnv(extra...)
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s.procs = append(s.procs, p)
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	return p
}

// run runs command c to its end and returns its outputs; a failed command
// fails t.
func (s *docSession) run(t *testing.T, c string, extra ...string) (stdout, stderr string) {
	t.Helper()
	return s.runRewritten(t, nil, c, extra...)
}

// wait waits for the command's end (bash's: a job it left in the
// background runs on until stop).
func (p *docProc) wait(ctx context.Context) error {
	select {
	case <-p.done:
		return p.err
	case <-ctx.Done():
		p.stop()
		<-p.done
		return fmt.Errorf("still running at the test's deadline: %w", ctx.Err())
	}
}

// waitFor waits until the command has printed want on its standard output;
// it fails t if the command ends first.
func (p *docProc) waitFor(t *testing.T, ctx context.Context, want string) {
	t.Helper()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for !strings.Contains(p.out(), want) {
		select {
		case <-p.done:
			if strings.Contains(p.out(), want) {
				return
			}
			t.Fatalf("%s ended (%v) without printing %q\nstdout:\n%s\nstderr:\n%s", p.text, p.err, want, tail(p.out()), tail(p.errOut()))
		case <-ctx.Done():
			t.Fatalf("%s: no %q by the test's deadline\nstdout:\n%s", p.text, want, tail(p.out()))
		case <-tick.C:
		}
	}
}

func (p *docProc) out() string    { return readAll(p.stdout) }
func (p *docProc) errOut() string { return readAll(p.stderr) }

// readAll reads what was written to f so far, through f itself: the test
// that made its directory may have ended and removed it.
func readAll(f *os.File) string {
	st, err := f.Stat()
	if err != nil {
		return ""
	}
	b, _ := io.ReadAll(io.NewSectionReader(f, 0, st.Size()))
	return string(b)
}

// signal sends sig to the command's whole process group.
func (p *docProc) signal(sig syscall.Signal) { _ = syscall.Kill(-p.cmd.Process.Pid, sig) }

// stop kills the command's process group: bash, what it runs and what it
// left in the background.
func (p *docProc) stop() { p.signal(syscall.SIGKILL) }

func (s *docSession) stopAll() {
	for _, p := range s.procs {
		p.stop()
		<-p.done
		p.stdout.Close()
		p.stderr.Close()
	}
	s.procs = nil
}

// tail is the end of a long output, for a failure message.
func tail(s string) string {
	const n = 6000
	if len(s) > n {
		return "...\n" + s[len(s)-n:]
	}
	return s
}

// testContext is a context that ends shortly before the test binary's
// deadline: a guard against a hang, not a bound on any outcome.
func testContext(t *testing.T) context.Context {
	ctx := context.Background()
	if d, ok := t.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d.Add(-30*time.Second))
		t.Cleanup(cancel)
	}
	return ctx
}

// lines returns the lines of s that contain sub.
func lines(s, sub string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), sub) {
			out = append(out, sc.Text())
		}
	}
	return out
}

// TestDocsBlocksAreReadAsWritten: the block reader and the command
// splitter on the forms the docs use.
func TestDocsBlocksAreReadAsWritten(t *testing.T) {
	md := "# Title\n\n## Run it\n\n```sh\nmake demo   # a comment\n# only a comment\n\nA=1 B=2 \\\n  go run ./x -n 3 &\n```\n\n" +
		"   ~~~~console\n   $ omnitrace import a.log\n   imported 1\n   $ echo \\\n   more\n   ~~~~\n\n## Run it\n\n```go\nx := 1\n```\n"
	blocks, err := parseBlocks("docs/x.md", md)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, b := range blocks {
		got = append(got, fmt.Sprintf("%s %s %d %q", b.key, b.lang, b.line, shellCommands(b.lang, b.text)))
	}
	want := []string{
		`docs/x.md#run-it/1 sh 6 ["make demo   # a comment" "A=1 B=2 \\\n  go run ./x -n 3 &"]`,
		`docs/x.md#run-it/2 console 14 ["omnitrace import a.log" "echo \\\nmore"]`,
		`docs/x.md#run-it/3 go 23 ["x := 1"]`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("read\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if _, err := parseBlocks("docs/x.md", "```sh\nmake demo\n"); err == nil {
		t.Error("a block that never closes is read without an error")
	}
	for text, want := range map[string]string{
		"package main\n":                        goProgram,
		"// a comment\nimport (\n\t\"os\"\n)\n": goFile,
		"func main() {}\n":                      goFile,
		"x := 1\nfunc() {}()\n":                 goStatements,
	} {
		if got := goForm(text); got != want {
			t.Errorf("goForm(%q) = %s, want %s", text, got, want)
		}
	}
	if a := anchor("3. Run Jaeger's `make` (UI)"); a != "3-run-jaegers-make-ui" {
		t.Errorf("anchor: %q", a)
	}
}
