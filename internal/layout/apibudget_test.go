// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package layout

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// apiBudget bounds the exported names of the public packages together;
// instrumentationBudget those of the instrumentation module's packages
// (otelomni, spans, attrs), which every engine that adopts it sees.
const apiBudget, instrumentationBudget = 210, 150

// notPublic are the directories whose packages are not the library's API.
var notPublic = map[string]bool{"internal": true, "cmd": true, "examples": true, "e2e": true,
	"tools": true, "testdata": true, "vendor": true, "docexamples": true, "testbed": true}

// publicAPI returns the exported names of every public package under root,
// by package directory: top-level functions, types, constants and
// variables, and "Type.Method" for each exported method of an exported type
// (struct fields are not counted).
func publicAPI(t *testing.T, root string) map[string][]string {
	t.Helper()
	api := map[string][]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != root && (notPublic[d.Name()] || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		if f.Name.Name == "main" {
			return nil
		}
		pkg, _ := filepath.Rel(root, filepath.Dir(p))
		add := func(name string) { api[pkg] = append(api[pkg], name) }
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				if d.Recv == nil {
					add(d.Name.Name)
					continue
				}
				typ := d.Recv.List[0].Type
				if s, ok := typ.(*ast.StarExpr); ok {
					typ = s.X
				}
				if ix, ok := typ.(*ast.IndexExpr); ok {
					typ = ix.X
				}
				if id, ok := typ.(*ast.Ident); ok && id.IsExported() {
					add(id.Name + "." + d.Name.Name)
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							add(s.Name.Name)
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								add(n.Name)
							}
						}
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return api
}

// TestThePublicAPIStaysWithinItsBudget: the public packages together
// export at most apiBudget names. Above it, the test lists every name, by
// package: a new name earns its place by a program that needs it, or an
// old one goes.
func TestThePublicAPIStaysWithinItsBudget(t *testing.T) {
	api := publicAPI(t, filepath.Join("..", ".."))
	var pkgs []string
	total := 0
	for pkg, names := range api {
		pkgs = append(pkgs, pkg)
		total += len(names)
	}
	sort.Strings(pkgs)
	for _, want := range []string{"otelomni", "spans", "attrs"} {
		if len(api[want]) == 0 {
			t.Fatalf("no exported names found in %s: the count reads the wrong tree", want)
		}
	}
	if n := len(api["otelomni"]) + len(api["spans"]) + len(api["attrs"]); n > instrumentationBudget {
		t.Errorf("otelomni, spans and attrs export %d names, more than their budget of %d:\notelomni: %s\nspans: %s\nattrs: %s",
			n, instrumentationBudget, strings.Join(api["otelomni"], " "), strings.Join(api["spans"], " "), strings.Join(api["attrs"], " "))
	}
	if total <= apiBudget {
		return
	}
	var b strings.Builder
	for _, pkg := range pkgs {
		names := api[pkg]
		sort.Strings(names)
		b.WriteString("\n" + pkg + " (" + itoa(len(names)) + "): " + strings.Join(names, " "))
	}
	t.Errorf("the public packages export %d names, more than the budget of %d:%s", total, apiBudget, b.String())
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var d []byte
	for ; n > 0; n /= 10 {
		d = append([]byte{byte('0' + n%10)}, d...)
	}
	return string(d)
}
