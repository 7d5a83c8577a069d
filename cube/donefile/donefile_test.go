package donefile

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseTolerant(t *testing.T) {
	in := `{"id":"1562000400","key":"1562000400","input":"/data/base1"}
garbage here
{"id":"abc","key":"1","input":"/x"}
{"id":"1562000500","key":"1562000500"}

{"id":"1562000600","key":"1562000600","input":"/data/base2"}
{"id":"1562000700","key":"15620`
	es, warns := Parse([]byte(in))
	if len(es) != 2 || es[0].Input != "/data/base1" || es[1].ID != "1562000600" {
		t.Fatalf("entries %+v", es)
	}
	if len(warns) != 4 {
		t.Fatalf("warnings %v", warns)
	}
	if !strings.Contains(warns[3].Reason, "partial") || warns[3].Line != 7 {
		t.Fatalf("last warning %v", warns[3])
	}
	if e, ok := Last(es); !ok || e.ID != "1562000600" {
		t.Fatal(e)
	}
}

func TestReadLocalAndHTTP(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "base.txt")
	if b, err := Read(context.Background(), nil, p); err != nil || b != nil {
		t.Fatalf("missing file: %q %v", b, err)
	}
	os.WriteFile(p, []byte(`{"id":"1","key":"1","input":"in"}`+"\n"), 0o644)
	b, err := Read(context.Background(), nil, p)
	if err != nil || len(b) == 0 {
		t.Fatal(err)
	}
	ts := httptest.NewServer(http.FileServer(http.Dir(dir)))
	defer ts.Close()
	b2, err := Read(context.Background(), nil, ts.URL+"/base.txt")
	if err != nil || string(b2) != string(b) {
		t.Fatalf("%q %v", b2, err)
	}
	if b, err := Read(context.Background(), nil, ts.URL+"/patch.txt"); err != nil || b != nil {
		t.Fatalf("missing over http: %q %v", b, err)
	}
	if got := Sibling(ts.URL+"/d/base.txt", "patch.txt"); got != ts.URL+"/d/patch.txt" {
		t.Fatal(got)
	}
	if got := Sibling(p, "patch.txt"); got != filepath.Join(dir, "patch.txt") {
		t.Fatal(got)
	}
	if got := InputLocation("http://h:1/donefile/base.txt", "/data/in"); got != "http://h:1/data/in" {
		t.Fatal(got)
	}
	if got := InputLocation(p, "in"); got != filepath.Join(dir, "in") {
		t.Fatal(got)
	}
	// cube model's lines: relative to the donefile's folder, wherever the output is served.
	if got := InputLocation("http://h:1/data/donefile/base.txt", "../data/1000"); got != "http://h:1/data/data/1000" {
		t.Fatal(got)
	}
	if got := InputLocation(filepath.Join(dir, "donefile", "base.txt"), "../data/1000"); got != filepath.Join(dir, "data", "1000") {
		t.Fatal(got)
	}
}
