package fileserver

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func serve(t *testing.T, upload bool) (string, string) {
	t.Helper()
	base := t.TempDir()
	root := filepath.Join(base, "root")
	os.MkdirAll(filepath.Join(root, "out", "v1"), 0o755)
	os.WriteFile(filepath.Join(root, "out", "v1", "shard-0.cube"), []byte("0123456789"), 0o644)
	os.WriteFile(filepath.Join(base, "secret"), []byte("secret"), 0o644)
	os.Symlink(filepath.Join(base, "secret"), filepath.Join(root, "escape"))
	h, err := New(Options{Root: root, Upload: upload})
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
	if resp, body := get(t, "GET", url+"/escape"); resp.StatusCode == 200 || strings.Contains(body, "secret") {
		t.Fatalf("symlink escape served: %d %q", resp.StatusCode, body)
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
	req, _ := http.NewRequest("PUT", url+"/conf/slot.conf", strings.NewReader("slots"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("%v %v", resp, err)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "conf", "slot.conf")); string(b) != "slots" {
		t.Fatalf("%q", b)
	}
	req, _ = http.NewRequest("PUT", url+"/../x", strings.NewReader("x"))
	req.URL.Path = "/../x"
	resp, err = http.DefaultClient.Do(req)
	if err == nil && resp.StatusCode == http.StatusCreated {
		t.Fatal("upload outside root accepted")
	}
}
