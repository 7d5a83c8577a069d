package atomicfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "VERSION")
	for _, content := range []string{"1000\n", "2000\n"} {
		if err := WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(p)
		if err != nil || string(b) != content {
			t.Fatalf("read %q, %v; want %q", b, err, content)
		}
	}
	st, _ := os.Stat(p)
	if st.Mode().Perm() != 0o644 {
		t.Fatalf("mode %v", st.Mode().Perm())
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("left behind: %v", ents)
	}
	// A directory that cannot be written: an error naming the path, nothing left.
	ro := filepath.Join(dir, "ro")
	os.Mkdir(ro, 0o555)
	if os.Getuid() != 0 { // root writes anyway
		if err := WriteFile(filepath.Join(ro, "x"), nil, 0o644); err == nil || !strings.Contains(err.Error(), `"`+filepath.Join(ro, "x")+`"`) {
			t.Fatalf("err %v", err)
		}
	}
	if err := WriteFile(filepath.Join(dir, "missing", "x"), nil, 0o644); err == nil {
		t.Fatal("wrote into a missing directory")
	}
}

func TestSHA256(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := WriteJSON(p, map[string]int{"a": 1}, 0o600); err != nil {
		t.Fatal(err)
	}
	sum, err := SHA256(p)
	if err != nil || len(sum) != 64 {
		t.Fatalf("sum %q err %v", sum, err)
	}
	if _, err := SHA256(p + ".missing"); err == nil {
		t.Fatal("hashed a missing file")
	}
}
