// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package layout

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// ruleFile is the one file of package otelomni that checks the rules of
// the span tree: an interval in order and in range, a phase inside its
// parent, a phase measured once.
const ruleFile = "rules.go"

// ruleChecks returns, for one Go file, a description of each place it
// checks a tree rule: a call of the checks themselves (plan.Within,
// plan.Check, an Interval's Validate, markMeasuredLocked), or a
// use of the error of a broken rule (to report it, or to count it).
func ruleChecks(t *testing.T, name string, src []byte) []string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, src, 0)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	ruleErrors := map[string]bool{
		"spans.ErrDuplicatePhase": true, "spans.ErrOutsideParent": true,
		"errParentEnded": true, "errBeforeScopeStart": true,
	}
	checks := map[string]bool{
		"plan.Within": true, "plan.Check": true, "Validate": true,
		"markMeasuredLocked": true,
	}
	var found []string
	at := func(n ast.Node, what string) {
		found = append(found, fset.Position(n.Pos()).String()+": "+what)
	}
	var visit func(n ast.Node) bool
	visit = func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CallExpr:
			if fn, ok := n.Fun.(*ast.SelectorExpr); ok && !checks[exprName(fn)] && checks[fn.Sel.Name] {
				// A method: r.markMeasuredLocked, iv.Validate.
				at(n, fn.Sel.Name)
			} else if checks[exprName(n.Fun)] {
				at(n, exprName(n.Fun))
			}
		case *ast.SelectorExpr:
			if ruleErrors[exprName(n)] {
				at(n, exprName(n))
			}
			// The selected name is no identifier of its own.
			ast.Inspect(n.X, visit)
			return false
		case *ast.Ident:
			if ruleErrors[n.Name] {
				at(n, n.Name)
			}
		}
		return true
	}
	ast.Inspect(f, visit)
	return found
}

// exprName returns an identifier or a selector as written, or "".
func exprName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		if x := exprName(e.X); x != "" {
			return x + "." + e.Sel.Name
		}
	}
	return ""
}

func TestTreeRulesAreCheckedInRulesGoOnly(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "otelomni", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	var inRules []string
	n := 0
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		n++
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		found := ruleChecks(t, path, src)
		if filepath.Base(path) == ruleFile {
			inRules = found
			continue
		}
		for _, f := range found {
			t.Errorf("a tree rule checked outside otelomni/%s: %s", ruleFile, f)
		}
	}
	if n < 20 {
		t.Fatalf("read %d files of otelomni: the check would be empty", n)
	}
	// Each check the test looks for is made in rules.go: a check renamed
	// there would otherwise pass unseen everywhere.
	for _, want := range []string{"plan.Within", "plan.Check", "markMeasuredLocked",
		"spans.ErrDuplicatePhase", "spans.ErrOutsideParent", "errParentEnded", "errBeforeScopeStart"} {
		if !containsSuffix(inRules, ": "+want) {
			t.Errorf("otelomni/%s makes no %s: the test looks for a check that is not there", ruleFile, want)
		}
	}
}

// TestRuleChecksFindsEachForm shows that ruleChecks sees each form of a
// check, so that the test above can fail.
func TestRuleChecksFindsEachForm(t *testing.T) {
	src := `package otelomni
func f(r *Request, iv spans.Interval) error {
	_ = plan.Within(iv, a, b)
	_ = plan.Check(p, 0, -1, iv)
	_ = iv.Validate()
	_ = r.markMeasuredLocked(p, -1, -1)
	_ = &spans.PhaseError{Phase: p, Err: spans.ErrDuplicatePhase}
	_ = errors.Is(err, spans.ErrOutsideParent)
	_ = fail(errParentEnded)
	_ = &stepError{err: errBeforeScopeStart}
	_ = &spans.PhaseError{Err: spans.ErrZeroTime}
	_ = plan.ParentOf(p)
	_ = r.errParentEnded2
	_ = wrap(errBeforeScopeStart).Error
	return nil
}
`
	found := ruleChecks(t, "x.go", []byte(src))
	want := []string{"plan.Within", "plan.Check", "Validate", "markMeasuredLocked",
		"spans.ErrDuplicatePhase", "spans.ErrOutsideParent", "errParentEnded", "errBeforeScopeStart",
		"errBeforeScopeStart"}
	if len(found) != len(want) {
		t.Fatalf("found %d checks, want %d:\n%s", len(found), len(want), strings.Join(found, "\n"))
	}
	for i, w := range want {
		if !strings.HasSuffix(found[i], ": "+w) {
			t.Errorf("check %d: found %s, want %s", i, found[i], w)
		}
	}
}

func containsSuffix(list []string, suffix string) bool {
	for _, s := range list {
		if strings.HasSuffix(s, suffix) {
			return true
		}
	}
	return false
}
