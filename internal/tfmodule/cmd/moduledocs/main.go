// Command moduledocs writes the inputs and outputs section of each module's README.md from
// its variables.tf and outputs.tf (make generate), or with -check fails when one differs
// from what it would write (make test).
//
//	go run ./internal/tfmodule/cmd/moduledocs [-check] DIR...
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/elasticctr/terraform-provider-ctr/internal/tfmodule"
)

func main() {
	check := flag.Bool("check", false, "write nothing; exit 1 when a README.md is not what would be written")
	flag.Parse()
	stale := 0
	for _, dir := range flag.Args() {
		ok, err := update(dir, *check)
		if err != nil {
			fmt.Fprintf(os.Stderr, "moduledocs: %v\n", err)
			os.Exit(1)
		}
		if !ok {
			stale++
			fmt.Fprintf(os.Stderr, "moduledocs: %s is stale: run make generate and commit the result\n", filepath.Join(dir, "README.md"))
		}
	}
	if stale > 0 {
		os.Exit(1)
	}
}

// update writes dir's README.md (unless check) and reports whether it was current.
func update(dir string, check bool) (bool, error) {
	m, err := tfmodule.Load(dir)
	if err != nil {
		return false, err
	}
	name := filepath.Join(dir, "README.md")
	old, err := os.ReadFile(name)
	if err != nil {
		return false, err
	}
	readme, err := tfmodule.Splice(string(old), tfmodule.Render(m))
	if err != nil {
		return false, fmt.Errorf("%s: %w", name, err)
	}
	if readme == string(old) {
		return true, nil
	}
	if check {
		return false, nil
	}
	return true, os.WriteFile(name, []byte(readme), 0o644)
}
