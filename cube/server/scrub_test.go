package server

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/client"
)

// TestScrubRetiresACorruptedDictionary: a byte of the served dictionary changed in place
// after it was opened (and verified) is found by the scrub; the version is retired, the
// older one on disk serves, and it is counted. Before, the changed value was served as is.
func TestScrubRetiresACorruptedDictionary(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	publishSized(t, data, "1700000000", 100, 40, 1)
	publishSized(t, data, "1700000100", 100, 40, 2)
	srv, addr := serveOpts(t, Options{DataDir: data, ScrubInterval: 50 * time.Millisecond})
	cur, _ := srv.store.versionNames()
	if cur != "1700000100" {
		t.Fatalf("serving %q, want the newer version", cur)
	}
	path := srv.store.cur.Load().d.Path()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := f.Stat()
	// A byte of the last value: the generation byte 2 becomes 3.
	if _, err := f.WriteAt([]byte{3}, st.Size()-1-int64(64)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if cur, _ := srv.store.versionNames(); cur == "1700000000" {
			break
		}
		if time.Now().After(deadline) {
			cur, _ := srv.store.versionNames()
			t.Fatalf("still serving %q 5 s after its file changed", cur)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := metric(t, addr, "cube_dict_corrupt_total"); n != 1 {
		t.Fatalf("cube_dict_corrupt_total = %v, want 1", n)
	}
	c, err := client.Dial(addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	vals, _, err := c.Seek([]uint64{5}, false, time.Now().Add(2*time.Second))
	if err != nil || len(vals) != 1 || vals[0].Status != 0 || vals[0].Value[len(vals[0].Value)-1] != 1 {
		t.Fatalf("after the retirement: %+v %v, want the older version's value (generation 1)", vals, err)
	}
}
