// Package cubetest is the tests' one way to build the cube binary: once per test process,
// removed when the tests end.
package cubetest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// Package is the cube binary's main package.
const Package = "github.com/elasticctr/terraform-provider-ctr/cube/cmd/cube"

var (
	once sync.Once
	dir  string
	bin  string
	err  error
)

// build builds the binary on first use; $CUBE_TEST_BINARY names one to use instead (e.g. an
// older build to run the tests against).
func build() (string, error) {
	once.Do(func() {
		if p := os.Getenv("CUBE_TEST_BINARY"); p != "" {
			bin = p
			return
		}
		if dir, err = os.MkdirTemp("", "cube-test-bin-"); err != nil {
			return
		}
		bin = filepath.Join(dir, "cube")
		if out, e := exec.Command("go", "build", "-o", bin, Package).CombinedOutput(); e != nil {
			err = fmt.Errorf("go build %s: %v\n%s", Package, e, out)
		}
	})
	return bin, err
}

// Binary is the cube binary, built on first use.
func Binary(tb testing.TB) string {
	tb.Helper()
	b, err := build()
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// Main is a TestMain: it builds the binary into *binary first when binary is not nil, runs
// the tests, removes the binary and exits with the tests' code.
func Main(m *testing.M, binary *string) {
	if binary != nil {
		b, err := build()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		*binary = b
	}
	code := m.Run()
	if dir != "" {
		os.RemoveAll(dir)
	}
	os.Exit(code)
}
