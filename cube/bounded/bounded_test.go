package bounded

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"
)

func TestReadAll(t *testing.T) {
	for _, tc := range []struct {
		in      string
		max     int64
		tooMany bool
	}{
		{"", 0, false},
		{"abc", 3, false},
		{"abc", 4, false},
		{"abcd", 3, true},
		{"a", 0, true},
	} {
		b, err := ReadAll(strings.NewReader(tc.in), tc.max)
		if tc.tooMany {
			if !errors.Is(err, ErrTooLarge) || b != nil {
				t.Errorf("%q max %d: got %q, %v; want no data and ErrTooLarge", tc.in, tc.max, b, err)
			}
			if err != nil && !strings.Contains(err.Error(), "limit") {
				t.Errorf("%q max %d: %v does not name the limit", tc.in, tc.max, err)
			}
			continue
		}
		if err != nil || string(b) != tc.in {
			t.Errorf("%q max %d: got %q, %v", tc.in, tc.max, b, err)
		}
	}
}

func TestReadAll_ReadErrorIsNotTooLarge(t *testing.T) {
	want := errors.New("connection reset")
	_, err := ReadAll(io.MultiReader(strings.NewReader("ab"), iotest.ErrReader(want)), 10)
	if !errors.Is(err, want) || errors.Is(err, ErrTooLarge) {
		t.Fatalf("got %v, want the read error", err)
	}
}

func TestReadFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, []byte("abc"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadFile(path, 3); err != nil || string(b) != "abc" {
		t.Errorf("at the limit: got %q, %v", b, err)
	}
	b, err := ReadFile(path, 2)
	var pe *fs.PathError
	if !errors.Is(err, ErrTooLarge) || b != nil || !errors.As(err, &pe) || pe.Path != path || pe.Op != "read" {
		t.Errorf("over the limit: got %q, %v; want no data and a read error of %s wrapping ErrTooLarge", b, err, path)
	}
	if _, err := ReadFile(path+"-missing", 3); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing file: %v", err)
	}
}
