package transfer

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/elasticctr/terraform-provider-ctr/cube/bounded"
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

// TestListingOverTheLimitIsRefused: a directory listing of the input server larger than
// maxListing fails the read instead of being cut, which would drop the files listed after
// the cut from the version's input.
func TestListingOverTheLimitIsRefused(t *testing.T) {
	dir := t.TempDir()
	tr := testTransfer(t, dir, filepath.Join(dir, "base.txt"))
	size := maxListing
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write(make([]byte, size))
	}))
	defer srv.Close()
	if _, err := tr.getSmall(context.Background(), srv.URL); err != nil {
		t.Fatalf("a listing of exactly the limit: %v", err)
	}
	size = maxListing + 1
	if b, err := tr.getSmall(context.Background(), srv.URL); !errors.Is(err, bounded.ErrTooLarge) || b != nil {
		t.Fatalf("a listing one byte over the limit: got %d bytes, %v; want ErrTooLarge and nothing", len(b), err)
	}
}
