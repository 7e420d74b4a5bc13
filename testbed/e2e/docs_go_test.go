// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/scanner"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/otelomni/otelomni/omnitrace/traceview"
	"github.com/otelomni/otelomni/testbed/internal/jaeger/jaegertest"
)

// docGoImports are the imports of a ```go block that has no import
// declaration of its own, each with a use, so that one the block does not
// need compiles too.
var docGoImports = []struct{ name, path, use string }{
	{"", "context", "context.Background"},
	{"", "errors", "errors.New"},
	{"", "fmt", "fmt.Sprint"},
	{"", "log", "log.Print"},
	{"", "log/slog", "slog.New"},
	{"", "os", "os.Exit"},
	{"", "time", "time.Now"},
	{"", "go.opentelemetry.io/contrib/bridges/otelslog", "otelslog.NewHandler"},
	{"", "go.opentelemetry.io/otel/attribute", "attribute.String"},
	{"", "go.opentelemetry.io/otel/propagation", "propagation.MapCarrier(nil)"},
	{"sdkmetric", "go.opentelemetry.io/otel/sdk/metric", "sdkmetric.NewMeterProvider"},
	{"sdktrace", "go.opentelemetry.io/otel/sdk/trace", "sdktrace.NewTracerProvider"},
	{"", "github.com/otelomni/otelomni/attrs", "attrs.ModalityImage"},
	{"", "github.com/otelomni/otelomni/otelomni", "otelomni.New"},
	{"", "github.com/otelomni/otelomni/otelsetup", "otelsetup.Setup"},
	{"", "github.com/otelomni/otelomni/spans", "spans.Between"},
}

// The forms of a ```go block.
const (
	goProgram    = "program"    // begins with package: compiled as it is
	goFile       = "file"       // top-level declarations
	goStatements = "statements" // the body of docBlock
)

// goForm tells a block's form by its first token.
func goForm(text string) string {
	fset := token.NewFileSet()
	var s scanner.Scanner
	s.Init(fset.AddFile("", fset.Base(), len(text)), []byte(text), nil, 0)
	_, tok, _ := s.Scan()
	switch tok {
	case token.PACKAGE:
		return goProgram
	case token.IMPORT, token.FUNC, token.TYPE, token.VAR, token.CONST:
		return goFile
	}
	return goStatements
}

// goSource makes the block's file: its text as written, under //line
// directives so that every error names the Markdown file and line.
func goSource(root string, b docBlock) (string, error) {
	at := fmt.Sprintf("//line %s:%d\n", filepath.Join(root, filepath.FromSlash(b.file)), b.line)
	form := goForm(b.text)
	if form == goProgram {
		return at + b.text, nil
	}
	var src strings.Builder
	src.WriteString("package main\n\n")
	ownImports := false
	if form == goFile {
		f, err := parser.ParseFile(token.NewFileSet(), b.file, "package main\n"+b.text, parser.ImportsOnly)
		if err == nil && len(f.Imports) > 0 {
			ownImports = true
		}
	}
	if !ownImports {
		src.WriteString("import (\n")
		for _, im := range docGoImports {
			fmt.Fprintf(&src, "\t%s %q\n", im.name, im.path)
		}
		src.WriteString(")\n\n")
		for _, im := range docGoImports {
			fmt.Fprintf(&src, "var _ = %s\n", im.use)
		}
		src.WriteString("\n")
	}
	if form == goFile {
		src.WriteString(at + b.text)
		return src.String(), nil
	}
	// Statements: the body of docBlock, which hands what it declares on to
	// docUse (the reader's next lines), by name.
	names, err := declaredNames(at, b.text)
	if err != nil {
		return "", fmt.Errorf("a ```go block that is neither a file nor a function's body: %v", err)
	}
	src.WriteString("func docBlock() {\n" + at + b.text)
	src.WriteString("//line docs-harness:1\n\tdocUse(map[string]any{")
	for _, n := range names {
		fmt.Fprintf(&src, "%q: %s, ", n, n)
	}
	src.WriteString("})\n}\n")
	return src.String(), nil
}

// declaredNames are the variables a statement block declares at its top
// level (:= and var), in order; at is the block's //line directive.
func declaredNames(at, text string) ([]string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), "", "package p\nfunc _() {\n"+at+text+"\n}\n", parser.ParseComments)
	if err != nil {
		return nil, err
	}
	var names []string
	seen := map[string]bool{}
	add := func(id *ast.Ident) {
		if id.Name != "_" && !seen[id.Name] {
			seen[id.Name] = true
			names = append(names, id.Name)
		}
	}
	for _, st := range f.Decls[0].(*ast.FuncDecl).Body.List {
		switch st := st.(type) {
		case *ast.AssignStmt:
			if st.Tok == token.DEFINE {
				for _, l := range st.Lhs {
					if id, ok := l.(*ast.Ident); ok {
						add(id)
					}
				}
			}
		case *ast.DeclStmt:
			if g, ok := st.Decl.(*ast.GenDecl); ok && g.Tok == token.VAR {
				for _, sp := range g.Specs {
					for _, id := range sp.(*ast.ValueSpec).Names {
						add(id)
					}
				}
			}
		}
	}
	return names, nil
}

// recorderGiven is the given of a statement block run with a span
// recorder: `in` records every span, and main runs the block, then
// docAfter (the given's, if any), then writes the spans as OTLP/JSON to
// $DOCS_SPANS.
const recorderGiven = `
import (
	"bytes"
	"os"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/otelomni/otelomni/otelomni"
	"github.com/otelomni/otelomni/omnitrace/traceview"
)

var rec = tracetest.NewSpanRecorder()

var in = otelomni.New(otelomni.WithTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))))

func main() {
	docBlock()
	docAfter()
	var b bytes.Buffer
	if err := traceview.WriteOTLPJSON(&b, traceview.FromSDK(rec.Ended())); err != nil {
		panic(err)
	}
	if err := os.WriteFile(os.Getenv("DOCS_SPANS"), b.Bytes(), 0o644); err != nil {
		panic(err)
	}
}
`

// goPackageDir is the directory of a block's package under the clone.
func goPackageDir(b docBlock) string {
	return "docexamples/" + regexp.MustCompile(`[^a-z0-9]+`).ReplaceAllString(strings.ToLower(b.key), "_")
}

// TestDocsGoBlocks compiles every ```go block of the docs (go vet: the type
// checker and vet's checks), each in a package of its own in the clone,
// and runs those whose entry checks an outcome.
func TestDocsGoBlocks(t *testing.T) {
	ws := theWorkspace(t)
	root := repoRoot(t)
	blocks := readBlocks(t, root, docFiles(t, root))
	inv := docsInventory()
	var pkgs, runs []string
	runBlocks := map[string]docBlock{}
	for _, b := range blocks {
		if b.lang != "go" {
			continue
		}
		e := entryFor(inv, b.key)
		if e == nil || e.goex == nil {
			t.Errorf("%s:%d: a ```go block without a goex entry (TestDocsInventory)", b.file, b.line)
			continue
		}
		dir := goPackageDir(b)
		if err := writeGoPackage(root, filepath.Join(ws.clone, dir), b, e.goex); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, "./"+dir)
		if e.goex.run != nil {
			runs = append(runs, "./"+dir)
			runBlocks[b.key] = b
		}
	}
	if len(pkgs) == 0 {
		t.Fatal("no ```go block found")
	}
	vet := exec.Command("go", append([]string{"vet"}, pkgs...)...)
	vet.Dir = ws.clone
	vet.Env = docEnv()
	if out, err := vet.CombinedOutput(); err != nil {
		t.Fatalf("a ```go block of the docs does not compile (go vet): %v\n%s", err, out)
	}
	binDir := filepath.Join(ws.clone, "docexamples", "bin")
	build := exec.Command("go", append([]string{"build", "-o", binDir + "/"}, runs...)...)
	build.Dir = ws.clone
	build.Env = docEnv()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	s := &docSession{ws: ws, ctx: testContext(t), jaeger: jaegertest.Start(t), state: map[string]any{}}
	t.Cleanup(s.stopAll)
	s.spans = map[string][]traceview.Span{}
	for _, e := range inv {
		b, ok := runBlocks[e.key]
		if !ok {
			continue
		}
		s.key = e.key
		t.Run(subtestName(e.key), func(t *testing.T) {
			e.goex.run(t, s, filepath.Join(binDir, filepath.Base(goPackageDir(b))))
		})
	}
	// The queries checked against what a ```go block made.
	for _, e := range inv {
		if e.check == nil || runBlocks[e.after].key == "" {
			continue
		}
		b := blockOf(t, e.key)
		t.Run(subtestName(e.key), func(t *testing.T) { runCheck(t, s, e, b) })
	}
}

// blockOf is the block with key.
func blockOf(t *testing.T, key string) docBlock {
	t.Helper()
	file, _, _ := strings.Cut(key, "#")
	for _, b := range readBlocks(t, repoRoot(t), []string{file}) {
		if b.key == key {
			return b
		}
	}
	t.Fatalf("no block %s", key)
	return docBlock{}
}

func subtestName(key string) string { return strings.ReplaceAll(key, "/", "_") }

func writeGoPackage(root, dir string, b docBlock, g *goExample) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	src, err := goSource(root, b)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "block.go"), []byte(src), 0o644); err != nil {
		return err
	}
	given := g.given
	hasMain := strings.Contains(given, "func main()") || strings.Contains(b.text, "func main()")
	if g.record {
		if err := os.WriteFile(filepath.Join(dir, "recorder.go"), []byte("package main\n"+recorderGiven), 0o644); err != nil {
			return err
		}
		hasMain = true
		if !strings.Contains(given, "func docAfter()") {
			given += "\nfunc docAfter() {}\n"
		}
	}
	if !hasMain {
		given += "\nfunc main() {}\n"
	}
	if goForm(b.text) == goStatements && !strings.Contains(given, "func docUse(") {
		given += "\nfunc docUse(map[string]any) {}\n"
	}
	return os.WriteFile(filepath.Join(dir, "given.go"), []byte("package main\n"+given), 0o644)
}

// runRecorded runs a block built with record, and returns its standard
// error and the spans it recorded.
func runRecorded(t *testing.T, s *docSession, bin string, env ...string) (string, []traceview.Span) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "spans.json")
	cmd := exec.CommandContext(s.ctx, bin)
	cmd.Env = docEnv(append(env, "DOCS_SPANS="+path)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if out, err := cmd.Output(); err != nil {
		t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", bin, err, out, stderr.String())
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ss, err := readOTLPJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	return stderr.String(), ss
}

// readOTLPJSON reads every span of an OTLP/JSON document, or of one a line.
func readOTLPJSON(r io.Reader) ([]traceview.Span, error) {
	var all []traceview.Span
	err := traceview.ReadOTLPJSON(r, func(ss []traceview.Span) error {
		all = append(all, ss...)
		return nil
	})
	return all, err
}
