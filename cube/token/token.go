// Package token holds a bearer token that may be rotated under a running
// process. Kubernetes updates a mounted Secret in place (a new directory and
// a symlink swapped to it), and each pod sees the change at its own moment,
// within a minute or two. So a Token read from a file reads it again when
// the file changes, and keeps accepting the token it replaced for a grace
// period; a caller refused with the new token may try the previous one. No
// process needs a restart for a rotation, and none refuses a peer that has
// not seen it yet.
package token

import (
	"crypto/subtle"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"
)

// checkEvery bounds how often the file is looked at (one stat).
const checkEvery = time.Second

// Token is a bearer token, static or read from a file. Its methods are safe
// for concurrent use.
type Token struct {
	file  string
	grace time.Duration
	now   func() time.Time

	mu        sync.Mutex
	cur, prev string
	prevUntil time.Time // prev is accepted until then
	stamp     stamp     // of the file the current token was read from
	checked   time.Time // the last look at the file
}

// stamp tells one version of a file from another.
type stamp struct {
	ino, size int64
	mtime     time.Time
}

// Static is a token that never changes; "" accepts every request.
func Static(tok string) *Token { return &Token{cur: tok, now: time.Now} }

// FromFile reads the token from file (it must not be empty) and reads it
// again whenever the file changes; the token replaced is accepted for grace
// more, which must be longer than the kubelet takes to update a Secret
// volume (its sync period, a minute by default, plus its cache's).
func FromFile(file string, grace time.Duration) (*Token, error) {
	if grace <= 0 {
		return nil, fmt.Errorf("token file %q: a grace period is required", file)
	}
	t := &Token{file: file, grace: grace, now: time.Now}
	tok, st, err := read(file)
	if err != nil {
		return nil, err
	}
	t.cur, t.stamp, t.checked = tok, st, t.now()
	return t, nil
}

// read reads a token file and its stamp.
func read(file string) (string, stamp, error) {
	fi, err := os.Stat(file)
	if err != nil {
		return "", stamp{}, err
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", stamp{}, err
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", stamp{}, fmt.Errorf("token file %q is empty", file)
	}
	return tok, stampOf(fi), nil
}

func stampOf(fi os.FileInfo) stamp {
	st := stamp{size: fi.Size(), mtime: fi.ModTime()}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		st.ino = int64(sys.Ino)
	}
	return st
}

// refresh reads the file again if it changed, looking at most every
// checkEvery unless force. A file that cannot be read, or is empty (in the
// middle of an update), keeps the current token. t.mu is held.
func (t *Token) refresh(force bool) {
	if t.file == "" {
		return
	}
	now := t.now()
	if !force && now.Sub(t.checked) < checkEvery {
		return
	}
	t.checked = now
	fi, err := os.Stat(t.file)
	if err != nil || stampOf(fi) == t.stamp {
		return
	}
	tok, st, err := read(t.file)
	if err != nil {
		return
	}
	t.stamp = st
	if tok != t.cur {
		t.prev, t.prevUntil, t.cur = t.cur, now.Add(t.grace), tok
	}
}

// Current is the token to send.
func (t *Token) Current() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.refresh(false)
	return t.cur
}

// Previous is the token the current one replaced, while it is accepted.
func (t *Token) Previous() (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.refresh(false)
	if t.prev == "" || !t.now().Before(t.prevUntil) {
		return "", false
	}
	return t.prev, true
}

// Empty reports a static empty token: every request is accepted.
func (t *Token) Empty() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.file == "" && t.cur == ""
}

// Accepts reports whether got is the current token, or the previous one
// within its grace period (constant time). A token that is neither makes
// the file be looked at at once: it may just have changed.
func (t *Token) Accepts(got string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.file == "" && t.cur == "" {
		return true
	}
	t.refresh(false)
	if t.matches(got) {
		return true
	}
	// The file may just have changed: look again, but not more often than a tenth of
	// checkEvery, to bound the stats a stream of bad tokens causes.
	if t.now().Sub(t.checked) < checkEvery/10 {
		return false
	}
	t.refresh(true)
	return t.matches(got)
}

// matches compares got with the current token and, within its grace period, the
// previous one, in constant time; t.mu is held.
func (t *Token) matches(got string) bool {
	ok := equal(got, t.cur)
	if t.prev != "" && t.now().Before(t.prevUntil) {
		ok = equal(got, t.prev) || ok
	}
	return ok
}

func equal(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

// AcceptsRequest reports whether r carries "Authorization: Bearer <token>"
// with a token Accepts.
func (t *Token) AcceptsRequest(r *http.Request) bool {
	if t.Empty() {
		return true
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && t.Accepts(got)
}
