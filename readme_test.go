package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestREADMELayoutNamesEveryPackage keeps the README's layout true: every folder of Go code
// under internal/ and cube/ is named in it (cube's by their name in the cube line, the others
// by their path).
func TestREADMELayoutNamesEveryPackage(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	start := strings.Index(readme, "## Layout")
	if start < 0 {
		t.Fatal("README.md has no Layout section")
	}
	layout := readme[start:]
	if end := strings.Index(layout[len("## Layout"):], "\n## "); end >= 0 {
		layout = layout[:len("## Layout")+end]
	}
	for _, root := range []string{"internal", "cube"} {
		entries, err := os.ReadDir(root)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if !e.IsDir() {
				continue
			}
			name := e.Name()
			in, want := layout, regexp.MustCompile(regexp.QuoteMeta(root+"/"+name+"/"))
			if root == "cube" { // named in the cube entry, up to the next top-level one
				in = layout[strings.Index(layout, "\ncube/"):]
				in = in[:strings.Index(in[1:], "\nexamples/")+1]
				want = regexp.MustCompile(`\b` + regexp.QuoteMeta(name) + `\b`)
			}
			if !want.MatchString(in) {
				t.Errorf("README.md's Layout does not name %s", filepath.Join(root, name))
			}
		}
	}
}
