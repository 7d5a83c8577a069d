package cubetest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// FindPaddleData locates a file of ../shared/reference/paddle-data (real files from Paddle's
// repositories, read in place, never copied) beside the checkout that holds the test.
func FindPaddleData(rel string) (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the test: cannot find ../shared")
		}
		dir = parent
	}
	p := filepath.Join(dir, "..", "shared", "reference", "paddle-data", rel)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%s is absent (the real Paddle fixtures live in ../shared beside the checkout): %w", p, err)
	}
	return p, nil
}

// PaddleData is FindPaddleData, or a skip that says why where the fixtures are absent.
func PaddleData(t testing.TB, rel string) string {
	t.Helper()
	p, err := FindPaddleData(rel)
	if err != nil {
		t.Skip(err)
	}
	return p
}

// ReadPaddleData is the content of PaddleData's file.
func ReadPaddleData(t testing.TB, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(PaddleData(t, rel))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
