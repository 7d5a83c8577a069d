package cubetest

import (
	"bytes"
	"io"
	"net/http"
	"sync"
	"testing"
)

// SyncBuffer is a bytes.Buffer that a process's output copier (or any other goroutine) may
// write while the test reads it.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String is what has been written so far.
func (s *SyncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// Status sends a method request for url with body (nil for none), and with "Authorization:
// Bearer token" unless token is "", and returns the response's status code; a request that
// gets no response fails the test.
func Status(tb testing.TB, method, url, token string, body io.Reader) int {
	tb.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		tb.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body) // drained for the connection's reuse; only the status counts
	resp.Body.Close()
	return resp.StatusCode
}

// Get returns the body of a GET of url, whatever the status; a request that gets no response
// fails the test.
func Get(tb testing.TB, url string) []byte {
	tb.Helper()
	resp, err := http.Get(url)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}
