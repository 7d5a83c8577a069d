package server

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/client"
	"github.com/elasticctr/terraform-provider-ctr/internal/cubetest"
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

// TestDamagedBlockIsNeverServed: a byte of a value in the last block of the newest version
// is wrong on disk before the server starts. Opened without a pass over the file
// (dict.Options.VerifyOnTouch), the version serves at once; the block is found by the
// background check or by the first lookup that reads it, the version is retired and
// counted, and the wrong value is never answered: the key reads the older version's value.
func TestDamagedBlockIsNeverServed(t *testing.T) {
	const n = 200_000
	data := filepath.Join(t.TempDir(), "data")
	publishSized(t, data, "1700000000", n, 40, 1)
	publishSized(t, data, "1700000100", n, 40, 2)
	path := filepath.Join(data, "1700000100", "shard-0.cube")
	img, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The last inline slot (key, value = key again and 32 bytes of the
	// generation) before the 4-byte block CRCs at the end of the file.
	key := -1
	for i := len(img) - 4*(len(img)>>16+1) - 48; i > len(img)-70_000; i-- {
		k := binary.LittleEndian.Uint64(img[i:])
		if k < n && binary.LittleEndian.Uint64(img[i+8:]) == k && bytes.Count(img[i+16:i+48], []byte{2}) == 32 {
			img[i+20] = 3
			key = int(k)
			break
		}
	}
	if key < 0 {
		t.Fatal("no inline slot found in the last block")
	}
	if err := os.WriteFile(path, img, 0o644); err != nil {
		t.Fatal(err)
	}
	// Found while the version is warmed, New reports the version it refused
	// and serves the older one, as it does for a file that fails to open.
	srv, err := New(Options{DataDir: data})
	if srv == nil {
		t.Fatal(err)
	}
	addr := cubetest.ServeLoopback(t, srv)
	c, err := client.Dial(addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		vals, _, err := c.Seek([]uint64{uint64(key)}, false, time.Now().Add(2*time.Second))
		if err == nil && len(vals) == 1 && vals[0].Status == 0 {
			switch g := vals[0].Value[len(vals[0].Value)-1]; {
			case bytes.Contains(vals[0].Value, []byte{3}):
				t.Fatalf("key %d: the damaged value was served: %x", key, vals[0].Value)
			case g == 1:
				if cur, _ := srv.store.versionNames(); cur != "1700000000" {
					t.Fatalf("older value read while serving %q", cur)
				}
				if got := metric(t, addr, "cube_dict_corrupt_total"); got != 1 {
					t.Fatalf("cube_dict_corrupt_total = %v, want 1", got)
				}
				return
			}
		}
		if time.Now().After(deadline) {
			cur, _ := srv.store.versionNames()
			t.Fatalf("still serving %q 5 s after start (last seek: %v)", cur, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestServesAVersion1Dictionary: a version written by an earlier release (dictionary format
// 1, the dict package's golden file) is served after the upgrade, every way a server opens it.
func TestServesAVersion1Dictionary(t *testing.T) {
	v1, err := os.ReadFile(filepath.Join("..", "dict", "testdata", "small.v1.cube"))
	if err != nil {
		t.Fatal(err)
	}
	for _, inMemory := range []bool{false, true} {
		data := t.TempDir()
		dir := filepath.Join(data, "1700000000")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "shard-0.cube"), v1, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "manifest.json"), []byte(`{"dict":"d","version":"1700000000","mode":"base","shard_count":1,"format":1}`), 0o644); err != nil {
			t.Fatal(err)
		}
		srv, addr := serveOpts(t, Options{DataDir: data, InMemory: inMemory})
		if cur, _ := srv.store.versionNames(); cur != "1700000000" {
			t.Fatalf("serving %q", cur)
		}
		c, err := client.Dial(addr, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		vals, _, err := c.Seek([]uint64{0, 42, 7, 3}, false, time.Now().Add(2*time.Second))
		c.Close()
		if err != nil || len(vals) != 4 || string(vals[0].Value) != "zero" || string(vals[1].Value) != "forty-two" ||
			string(vals[2].Value) != "second wins" || vals[3].Status == 0 {
			t.Fatalf("in-memory %v: %+v %v", inMemory, vals, err)
		}
	}
}
