// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package layout

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// spdx is the licence line every source file carries near its top.
const spdx = "// SPDX-License-Identifier: Apache-2.0"

// TestEverySourceFileNamesItsLicence checks that each Go file of the
// repository (the tools' modules too) carries the SPDX line of the
// LICENSE within its first lines, before its package clause, and so do the
// Makefile, the CI script and the shipped configurations.
func TestEverySourceFileNamesItsLicence(t *testing.T) {
	dir, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	lic, err := os.ReadFile(filepath.Join(dir, "LICENSE"))
	if err != nil || !strings.Contains(string(lic), "Apache License") || !strings.Contains(string(lic), "Version 2.0") {
		t.Fatalf("LICENSE is not the Apache License 2.0: %v", err)
	}
	n := 0
	err = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "bin", "testdata":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		n++
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for i := 0; i < 5 && sc.Scan(); i++ {
			line := sc.Text()
			if line == spdx {
				return nil
			}
			if strings.HasPrefix(line, "package ") {
				break
			}
		}
		rel, _ := filepath.Rel(dir, p)
		t.Errorf("%s: no %q before its package clause", rel, spdx)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"Makefile", ".ci/run", "deploy/collector.yaml", "deploy/backend.yaml"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		head := string(b[:min(len(b), 200)])
		if !strings.Contains(head, "# SPDX-License-Identifier: Apache-2.0\n") {
			t.Errorf("%s: no SPDX line at its top", f)
		}
	}
	if n < 50 {
		t.Fatalf("%d Go files found: the check would be empty", n)
	}
}
