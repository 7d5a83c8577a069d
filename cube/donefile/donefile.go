// Package donefile reads Paddle's donefiles (base.txt, patch.txt: one JSON
// line per version, appended by the trainer) from a local path or over HTTP.
package donefile

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/elasticctr/terraform-provider-ctr/cube/bounded"
)

// Entry is one donefile line: {"id":"1562000400","key":"1562000400","input":"/path"}.
// For a base, Key == ID; for a patch, Key is the ID of its base.
type Entry struct {
	ID    string `json:"id"`
	Key   string `json:"key"`
	Input string `json:"input"`
}

// Warning says why a line was skipped.
type Warning struct {
	Line   int
	Reason string
}

func (w Warning) String() string { return fmt.Sprintf("line %d: %s", w.Line, w.Reason) }

// Parse returns the valid entries of a donefile in order. A line that is not
// a JSON object with decimal id and key and a non-empty input is skipped with
// a warning (a trainer may be appending the last line while we read, and a
// stray line must not stop the cube). A last line without '\n' that does not
// parse is reported as partial.
func Parse(b []byte) ([]Entry, []Warning) {
	var (
		out   []Entry
		warns []Warning
	)
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var e Entry
		err := json.Unmarshal([]byte(line), &e)
		switch {
		case err != nil:
			reason := "not JSON: " + err.Error()
			if !bytes.HasSuffix(b, []byte("\n")) && n == countLines(b) {
				reason = "partial last line (still being written?)"
			}
			warns = append(warns, Warning{n, reason})
			continue
		case !decimal(e.ID) || !decimal(e.Key):
			warns = append(warns, Warning{n, fmt.Sprintf("id %q / key %q: want decimal strings", e.ID, e.Key)})
			continue
		case e.Input == "":
			warns = append(warns, Warning{n, "no input"})
			continue
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		warns = append(warns, Warning{n + 1, err.Error()})
	}
	return out, warns
}

func countLines(b []byte) int {
	n := bytes.Count(b, []byte("\n"))
	if len(b) > 0 && b[len(b)-1] != '\n' {
		n++
	}
	return n
}

func decimal(s string) bool {
	_, err := strconv.ParseUint(s, 10, 63)
	return err == nil
}

// MaxSize bounds a donefile read over HTTP: one JSON line per version,
// so 64 MiB is years of versions; a larger answer is refused, not cut.
const MaxSize = 64 << 20

// Read fetches a donefile from a local path or an http(s) URL with client
// (nil: http.DefaultClient, which has no deadlines: callers that face
// untrusted servers pass a bounded one and a context with a deadline). A
// missing file reads as empty (no version published yet), not as an error.
func Read(ctx context.Context, client *http.Client, loc string) ([]byte, error) {
	if !isURL(loc) {
		b, err := os.ReadFile(loc)
		if os.IsNotExist(err) {
			return nil, nil
		}
		return b, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, loc, nil)
	if err != nil {
		return nil, err
	}
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		return nil, nil
	default:
		return nil, fmt.Errorf("get %s: %s", loc, resp.Status)
	}
	if resp.ContentLength > MaxSize {
		return nil, fmt.Errorf("get %s: %d bytes, over the %d-byte limit", loc, resp.ContentLength, MaxSize)
	}
	b, err := bounded.ReadAll(resp.Body, MaxSize)
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", loc, err)
	}
	return b, nil
}

func isURL(s string) bool {
	return strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://")
}

// Sibling names another file in the donefile's directory: patch.txt next to
// base.txt.
func Sibling(loc, name string) string {
	if isURL(loc) {
		u, err := url.Parse(loc)
		if err == nil {
			u.Path = path.Join(path.Dir(u.Path), name)
			return u.String()
		}
	}
	return filepath.Join(filepath.Dir(loc), name)
}

// InputLocation resolves an entry's input against the donefile's location:
// for an HTTP donefile an input path is a URL path on the same host (as
// Paddle's transfer does); a full URL is kept; for a local donefile the
// input is a local path (relative ones are taken from the donefile's dir).
func InputLocation(donefileLoc, input string) string {
	if isURL(input) {
		return input
	}
	if isURL(donefileLoc) {
		u, err := url.Parse(donefileLoc)
		if err == nil {
			if strings.HasPrefix(input, "/") {
				u.Path = input
			} else {
				u.Path = path.Join(path.Dir(u.Path), input)
			}
			u.RawQuery = ""
			return u.String()
		}
	}
	if filepath.IsAbs(input) {
		return input
	}
	return filepath.Join(filepath.Dir(donefileLoc), input)
}

// Last returns the last entry (Paddle's transfer considers only the last
// line of base.txt), or false if there is none.
func Last(es []Entry) (Entry, bool) {
	if len(es) == 0 {
		return Entry{}, false
	}
	return es[len(es)-1], true
}
