package fileserver

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/elasticctr/terraform-provider-ctr/internal/cubetest"
)

const token = "upload-token"

func serve(t *testing.T, upload bool) (string, string) {
	t.Helper()
	base := t.TempDir()
	root := filepath.Join(base, "root")
	os.MkdirAll(filepath.Join(root, "out", "v1"), 0o755)
	os.WriteFile(filepath.Join(root, "out", "v1", "shard-0.cube"), []byte("0123456789"), 0o644)
	os.WriteFile(filepath.Join(base, "secret"), []byte("secret"), 0o644)
	os.Symlink(filepath.Join(base, "secret"), filepath.Join(root, "escape"))
	os.Symlink(base, filepath.Join(root, "escapedir"))
	os.Symlink(filepath.Join(base, "nowhere"), filepath.Join(root, "dangling"))
	h, err := New(Options{Root: root, Upload: upload, UploadToken: token})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(func() { ts.Close(); h.Close() })
	return ts.URL, root
}

func get(t *testing.T, method, url string, hdr ...string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestListingRangeHead(t *testing.T) {
	url, _ := serve(t, false)
	resp, body := get(t, "GET", url+"/out/")
	if resp.StatusCode != 200 || !strings.Contains(body, `<a href="v1/">v1/</a>`) {
		t.Fatalf("listing %d %q", resp.StatusCode, body)
	}
	resp, body = get(t, "GET", url+"/out/v1/shard-0.cube", "Range", "bytes=2-4")
	if resp.StatusCode != http.StatusPartialContent || body != "234" {
		t.Fatalf("range %d %q", resp.StatusCode, body)
	}
	resp, body = get(t, "HEAD", url+"/out/v1/shard-0.cube")
	if resp.StatusCode != 200 || body != "" || resp.ContentLength != 10 {
		t.Fatalf("head %d %q %d", resp.StatusCode, body, resp.ContentLength)
	}
	resp, _ = get(t, "PUT", url+"/out/x")
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("put on read-only: %d", resp.StatusCode)
	}
}

func TestRefusesOutsideRoot(t *testing.T) {
	url, _ := serve(t, false)
	for _, p := range []string{"/escape", "/escapedir/secret", "/escapedir/", "/dangling"} {
		for _, m := range []string{"GET", "HEAD"} {
			if resp, body := get(t, m, url+p); resp.StatusCode != http.StatusForbidden || strings.Contains(body, "secret") {
				t.Fatalf("%s %s (symlink out of the root): %d %q, want 403", m, p, resp.StatusCode, body)
			}
		}
	}
	// Send a raw request so that no client cleans the dot-dot away.
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET /out/../../secret HTTP/1.0\r\n\r\n")
	b, _ := io.ReadAll(c)
	if strings.Contains(string(b), "secret\n") || strings.HasSuffix(string(b), "secret") || strings.Contains(string(b), " 200 ") {
		t.Fatalf("dot-dot escape: %q", b)
	}
}

func TestUpload(t *testing.T) {
	url, root := serve(t, true)
	if code := cubetest.Status(t, "PUT", url+"/conf/slot.conf", token, strings.NewReader("slots")); code != http.StatusCreated {
		t.Fatalf("upload: %d, want 201", code)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "conf", "slot.conf")); string(b) != "slots" {
		t.Fatalf("%q", b)
	}
	req, _ := http.NewRequest("PUT", url+"/../x", strings.NewReader("x"))
	req.URL.Path = "/../x"
	resp, err := http.DefaultClient.Do(req)
	if err == nil && resp.StatusCode == http.StatusCreated {
		t.Fatal("upload outside root accepted")
	}
}

func TestUploadNeedsToken(t *testing.T) {
	if _, err := New(Options{Root: t.TempDir(), Upload: true}); err == nil {
		t.Fatal("uploads without a token accepted at start")
	}
	h, err := New(Options{Root: t.TempDir(), Upload: true, UploadInsecure: true})
	if err != nil {
		t.Fatalf("explicit opt-out refused: %v", err)
	}
	h.Close()
	url, root := serve(t, true)
	for _, tok := range []string{"", "wrong"} {
		if code := cubetest.Status(t, "PUT", url+"/x", tok, strings.NewReader("x")); code != http.StatusUnauthorized {
			t.Fatalf("upload with token %q: %d, want 401", tok, code)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "x")); err == nil {
		t.Fatal("unauthorised upload written")
	}
	if code := cubetest.Status(t, "PUT", url+"/escapedir/planted", token, strings.NewReader("x")); code != http.StatusForbidden {
		t.Fatalf("upload through a symlink out of the root: %d, want 403", code)
	}
	if code := cubetest.Status(t, "PUT", url+"/.tmp-upload-0", token, strings.NewReader("x")); code != http.StatusBadRequest {
		t.Fatalf("upload to a hidden name: %d, want 400", code)
	}
}

// TestConcurrentUploadsNeverMix: two uploads to one path, their bodies sent
// in alternating chunks so that both are being written at once; the file
// published is one whole body, never a mix.
func TestConcurrentUploadsNeverMix(t *testing.T) {
	url, root := serve(t, true)
	const chunk, chunks = 64 << 10, 32
	type up struct {
		w    *io.PipeWriter
		code chan int
	}
	start := func() up {
		r, w := io.Pipe()
		u := up{w, make(chan int, 1)}
		go func() { u.code <- cubetest.Status(t, "PUT", url+"/conf/model.bin", token, r) }()
		return u
	}
	a, b := start(), start()
	for i := range chunks {
		for _, x := range []struct {
			u up
			c byte
		}{{a, 'a'}, {b, 'b'}} {
			if _, err := x.u.w.Write(bytes.Repeat([]byte{x.c}, chunk)); err != nil {
				t.Fatalf("chunk %d: %v", i, err)
			}
		}
	}
	a.w.Close()
	b.w.Close()
	ca, cb := <-a.code, <-b.code
	got, err := os.ReadFile(filepath.Join(root, "conf", "model.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != chunk*chunks || (!bytes.Equal(got, bytes.Repeat([]byte{'a'}, len(got))) && !bytes.Equal(got, bytes.Repeat([]byte{'b'}, len(got)))) {
		t.Fatalf("published %d bytes, %d of them 'a': a mix of two uploads", len(got), bytes.Count(got, []byte{'a'}))
	}
	if ca != http.StatusCreated || cb != http.StatusCreated {
		t.Fatalf("uploads answered %d and %d, want 201 both (last complete one wins)", ca, cb)
	}
	if left, _ := filepath.Glob(filepath.Join(root, "conf", ".tmp-*")); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}

// TestHiddenNeverListedNorServed: dotfiles and the .tmp-* files and
// directories of work in progress are neither listed nor served.
func TestHiddenNeverListedNorServed(t *testing.T) {
	url, root := serve(t, false)
	os.WriteFile(filepath.Join(root, "out", ".secret"), []byte("s"), 0o644)
	os.MkdirAll(filepath.Join(root, "out", ".tmp-v2-123"), 0o755)
	os.WriteFile(filepath.Join(root, "out", ".tmp-v2-123", "shard-0.cube"), []byte("half"), 0o644)
	os.WriteFile(filepath.Join(root, "out", ".tmp-upload-1"), []byte("half"), 0o644)
	resp, body := get(t, "GET", url+"/out/")
	if resp.StatusCode != 200 || !strings.Contains(body, "v1/") || strings.Contains(body, ".secret") || strings.Contains(body, ".tmp") {
		t.Fatalf("listing %d %q", resp.StatusCode, body)
	}
	for _, p := range []string{"/out/.secret", "/out/.tmp-v2-123/", "/out/.tmp-v2-123/shard-0.cube", "/out/.tmp-upload-1"} {
		for _, m := range []string{"GET", "HEAD"} {
			if resp, body := get(t, m, url+p); resp.StatusCode != http.StatusNotFound || strings.Contains(body, "half") {
				t.Fatalf("%s %s: %d %q, want 404", m, p, resp.StatusCode, body)
			}
		}
	}
}
