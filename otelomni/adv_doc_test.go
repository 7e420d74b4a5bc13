// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelomni_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// The package's comments name only what exists: every doc link ([Name],
// [Type.Member]) and every mention of an option (WithX) or of a member of
// one of its types (Request.X, Stats.X, ...) resolves to a declaration of
// the package. A name left behind by a removal tells users to call what
// is not there.
func TestAdvCommentsNameOnlyWhatExists(t *testing.T) {
	fset := token.NewFileSet()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, e := range entries {
		n := e.Name()
		if !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, n, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	top := map[string]bool{}
	members := map[string]map[string]bool{} // type -> methods and fields
	member := func(typ, name string) {
		if members[typ] == nil {
			members[typ] = map[string]bool{}
		}
		members[typ][name] = true
	}
	for _, f := range files {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					top[d.Name.Name] = true
					continue
				}
				rt := d.Recv.List[0].Type
				if s, ok := rt.(*ast.StarExpr); ok {
					rt = s.X
				}
				if id, ok := rt.(*ast.Ident); ok {
					member(id.Name, d.Name.Name)
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						top[s.Name.Name] = true
						if st, ok := s.Type.(*ast.StructType); ok {
							for _, fl := range st.Fields.List {
								for _, n := range fl.Names {
									member(s.Name.Name, n.Name)
								}
							}
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							top[n.Name] = true
						}
					}
				}
			}
		}
	}
	link := regexp.MustCompile(`\[([A-Z]\w*)(?:\.([A-Z]\w*))?\]`)
	option := regexp.MustCompile(`(?:^|[^.\w])(With[A-Z]\w*)`) // not context.WithTimeout
	qualified := regexp.MustCompile(`\b(Request|ActivePhase|Instrumenter|Batch|Engine|EnginePhase|Stats|RequestInfo|StageInfo|BatchInfo|EngineInfo|LoadInfo)\.([A-Z]\w*)`)
	var bad []string
	for _, f := range files {
		for _, cg := range f.Comments {
			text := cg.Text()
			pos := fset.Position(cg.Pos())
			// at names the line of a match at offset i of text.
			at := func(i int) string { return pos.Filename + ":" + itoa(pos.Line+strings.Count(text[:i], "\n")) }
			for _, ix := range link.FindAllStringSubmatchIndex(text, -1) {
				m := submatches(text, ix)
				where := at(ix[0])
				switch {
				case m[2] == "" && !top[m[1]]:
					bad = append(bad, where+": "+m[0])
				case m[2] != "" && !members[m[1]][m[2]]:
					bad = append(bad, where+": "+m[0])
				}
			}
			for _, ix := range option.FindAllStringSubmatchIndex(text, -1) {
				m, where := submatches(text, ix), at(ix[2])
				if !top[m[1]] {
					bad = append(bad, where+": "+m[1])
				}
			}
			for _, ix := range qualified.FindAllStringSubmatchIndex(text, -1) {
				m, where := submatches(text, ix), at(ix[0])
				if !members[m[1]][m[2]] {
					bad = append(bad, where+": "+m[0])
				}
			}
		}
	}
	sort.Strings(bad)
	for _, b := range bad {
		t.Errorf("a comment names what the package does not declare: %s", b)
	}
}

// submatches returns the strings of one FindAllStringSubmatchIndex match.
func submatches(text string, ix []int) []string {
	out := make([]string, len(ix)/2)
	for i := range out {
		if ix[2*i] >= 0 {
			out[i] = text[ix[2*i]:ix[2*i+1]]
		}
	}
	return out
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}
