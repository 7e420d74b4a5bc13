// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package layout

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// exported returns the exported names of the Go package in dir: top-level
// identifiers, and "Type.Method" and "Type.Field" for exported types.
func exported(t *testing.T, dir string) map[string]bool {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var parsed []*ast.File
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		parsed = append(parsed, f)
	}
	names := map[string]bool{}
	{
		for _, f := range parsed {
			for _, d := range f.Decls {
				switch d := d.(type) {
				case *ast.FuncDecl:
					if d.Recv == nil {
						names[d.Name.Name] = true
						continue
					}
					typ := d.Recv.List[0].Type
					if s, ok := typ.(*ast.StarExpr); ok {
						typ = s.X
					}
					if id, ok := typ.(*ast.Ident); ok {
						names[id.Name+"."+d.Name.Name] = true
					}
				case *ast.GenDecl:
					for _, s := range d.Specs {
						switch s := s.(type) {
						case *ast.TypeSpec:
							names[s.Name.Name] = true
							if st, ok := s.Type.(*ast.StructType); ok {
								for _, f := range st.Fields.List {
									for _, n := range f.Names {
										names[s.Name.Name+"."+n.Name] = true
									}
								}
							}
						case *ast.ValueSpec:
							for _, n := range s.Names {
								names[n.Name] = true
							}
						}
					}
				}
			}
		}
	}
	return names
}

// TestEveryNameTheDocsUseResolves: each pkg.Name, and each Type.Method of
// this module's packages, that the README and docs mention exists.
func TestEveryNameTheDocsUseResolves(t *testing.T) {
	root := filepath.Join("..", "..")
	pkgs := map[string]map[string]bool{}
	all := map[string]bool{}
	for p, dir := range map[string]string{
		"otelomni": "otelomni", "otelsetup": "otelsetup", "spans": "spans", "attrs": "attrs",
		"traceview": "omnitrace/traceview", "jaegerquery": "omnitrace/jaegerquery",
	} {
		pkgs[p] = exported(t, filepath.Join(root, dir))
		if len(pkgs[p]) == 0 {
			t.Fatalf("package %s (%s) declares nothing: the check would be empty", p, dir)
		}
		for n := range pkgs[p] {
			all[n] = true
		}
	}
	// A type is a name with methods or fields; a constant such as
	// attrs.BatchSizeKey has none, and attrs.BatchSizeKey.Int is the
	// method of its type, attribute.Key.
	types := map[string]bool{}
	for n := range all {
		if typ, _, ok := strings.Cut(n, "."); ok {
			types[typ] = true
		}
	}
	docs, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	docs = append(docs, filepath.Join(root, "README.md"))
	qualified := regexp.MustCompile(`\b(otelomni|otelsetup|spans|attrs|traceview|jaegerquery)\.([A-Z]\w*)(\.([A-Z]\w*))?`)
	method := regexp.MustCompile("`([A-Z]\\w*)\\.([A-Z]\\w*)")
	checked := 0
	for _, d := range docs {
		b, err := os.ReadFile(d)
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		for _, m := range qualified.FindAllStringSubmatch(text, -1) {
			checked++
			name := m[2]
			if m[4] != "" && types[m[2]] {
				name = m[2] + "." + m[4]
			}
			if !pkgs[m[1]][name] {
				t.Errorf("%s: %s.%s does not exist", filepath.Base(d), m[1], name)
			}
		}
		for _, m := range method.FindAllStringSubmatch(text, -1) {
			if types[m[1]] {
				checked++
				if !all[m[1]+"."+m[2]] {
					t.Errorf("%s: %s.%s does not exist", filepath.Base(d), m[1], m[2])
				}
			}
		}
	}
	if checked < 50 {
		t.Fatalf("only %d names checked: the check would be empty", checked)
	}
}

// TestEveryTestTheDocsCiteExists: each test, benchmark, fuzz target and
// example the README, CHANGELOG.md, CONTRIBUTING.md and docs name as the
// proof of a claim is declared in a _test.go file of the repository.
func TestEveryTestTheDocsCiteExists(t *testing.T) {
	root := filepath.Join("..", "..")
	declared := map[string]bool{}
	decl := regexp.MustCompile(`(?m)^func ((?:Test|Benchmark|Fuzz|Example)\w*)\(`)
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "bin" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range decl.FindAllStringSubmatch(string(b), -1) {
			declared[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	docs, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	docs = append(docs, filepath.Join(root, "README.md"), filepath.Join(root, "CHANGELOG.md"), filepath.Join(root, "CONTRIBUTING.md"))
	cited := regexp.MustCompile(`\b((?:Test|Benchmark|Fuzz)[A-Z]\w*)`)
	checked := 0
	for _, d := range docs {
		b, err := os.ReadFile(d)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range cited.FindAllStringSubmatch(string(b), -1) {
			checked++
			if !declared[m[1]] {
				t.Errorf("%s cites %s, which no _test.go declares", filepath.Base(d), m[1])
			}
		}
	}
	if checked < 20 {
		t.Fatalf("only %d citations checked: the check would be empty", checked)
	}
}
