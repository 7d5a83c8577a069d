package transfer

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
)

// TestFilesApart: with the files apart, the status API does not serve the
// model (a NetworkPolicy admits only cube servers to the files port), and
// the files port serves nothing but the files and its health check.
func TestFilesApart(t *testing.T) {
	dir := t.TempDir()
	tr := testTransfer(t, dir, filepath.Join(dir, "base.txt"))
	if err := os.MkdirAll(filepath.Join(tr.outputDir(), "1000"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tr.outputDir(), "1000", "shard-0.cube"), []byte("dict"), 0o644); err != nil {
		t.Fatal(err)
	}
	get := func(h http.Handler, path string) int {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code
	}
	api, files, err := tr.Handlers(false)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		h    http.Handler
		path string
		want int
	}{
		{"api status", api, "/status", 200},
		{"api has no files", api, "/files/1000/shard-0.cube", 404},
		{"files", files, "/files/1000/shard-0.cube", 200},
		{"files healthz", files, "/healthz", 200},
		{"files has no status", files, "/status", 404},
		{"files has no metrics", files, "/metrics", 404},
	} {
		if got := get(c.h, c.path); got != c.want {
			t.Errorf("%s: GET %s = %d, want %d", c.name, c.path, got, c.want)
		}
	}
	together, none, err := tr.Handlers(true)
	if err != nil || none != nil {
		t.Fatalf("together: files handler %v, err %v", none, err)
	}
	if got := get(together, "/files/1000/shard-0.cube"); got != 200 {
		t.Errorf("together: GET /files/ = %d", got)
	}
}
