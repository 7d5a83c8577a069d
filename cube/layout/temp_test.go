package layout

import (
	"os"
	"path/filepath"
	"testing"
)

// TestRemoveStale: a build directory whose TempDir is open (a live build,
// here in the same process, which flock treats like another) is kept; once
// closed without being renamed (the build died) it is removed. Directories
// CreateTemp did not name, such as the agent's downloads, are never touched.
func TestRemoveStale(t *testing.T) {
	root := t.TempDir()
	live, err := CreateTemp(root, "1700000000")
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	dead, err := CreateTemp(root, "1700000001")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dead.Path, "shard-0.cube"), []byte("partial"), 0o644); err != nil {
		t.Fatal(err)
	}
	dead.Close()
	agent := filepath.Join(root, ".tmp-1700000001-agent")
	if err := os.Mkdir(agent, 0o755); err != nil {
		t.Fatal(err)
	}
	removed, err := RemoveStale(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 1 || removed[0] != dead.Path {
		t.Fatalf("removed %v, want [%s]", removed, dead.Path)
	}
	for _, p := range []string{live.Path, agent} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	if st, _ := os.Stat(live.Path); st.Mode().Perm() != 0o755 {
		t.Errorf("build dir mode %v, want 0755", st.Mode().Perm())
	}
}
