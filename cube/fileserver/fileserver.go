// Package fileserver serves a model-output directory over HTTP the way
// Paddle's transfer mirrors it (wget -r over directory listings), with HEAD
// and Range, and optional token-protected uploads; it never serves a path
// outside its root, nor a hidden one.
package fileserver

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path"
	"strings"
)

// Options configure a Handler.
type Options struct {
	// Root is the directory served. Required.
	Root string
	// Upload allows PUT (and POST) of files below Root; default read-only.
	// ElasticCTR uploads slot.conf this way.
	Upload bool
	// UploadToken is required as "Authorization: Bearer <token>" on every
	// upload. With Upload on, New refuses an empty one unless UploadInsecure.
	UploadToken string
	// UploadInsecure accepts uploads from anyone (no token): only for a
	// network where every client is trusted.
	UploadInsecure bool
	// MaxUpload bounds an upload in bytes. If 0, it defaults to 1 GiB.
	MaxUpload int64
	// Log defaults to slog.Default().
	Log *slog.Logger
}

// Handler serves Options.Root.
type Handler struct {
	opts    Options
	root    *os.Root
	files   http.Handler
	escapes error // os.Root's "path escapes from parent", to tell it apart
}

// New opens the root. Paths are resolved through os.Root, which refuses
// "..", absolute paths and symlinks that lead out of the root, so a crafted
// URL or a stray symlink cannot expose the rest of the file system.
func New(opts Options) (*Handler, error) {
	if opts.Root == "" {
		return nil, errors.New("fileserver: root is required")
	}
	if opts.Upload && opts.UploadToken == "" && !opts.UploadInsecure {
		return nil, errors.New("fileserver: uploads need a token (or an explicit opt-out: insecure uploads)")
	}
	if opts.MaxUpload <= 0 {
		opts.MaxUpload = 1 << 30
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	r, err := os.OpenRoot(opts.Root)
	if err != nil {
		return nil, fmt.Errorf("fileserver: open root %q: %w", opts.Root, err)
	}
	// os.Root does not export the error it returns for an escape; ask it
	// for one, so that escapes can be answered 403 (not 500) by identity.
	var escapes error
	var pe *fs.PathError
	if _, err := r.Lstat(".."); errors.As(err, &pe) {
		escapes = pe.Err
	}
	h := &Handler{opts: opts, root: r, escapes: escapes}
	// http.FileServerFS writes "<pre><a href=...>" listings (what wget -r
	// follows), answers HEAD, Range and If-Modified-Since.
	h.files = http.FileServerFS(visibleFS{h})
	return h, nil
}

// Close releases the root directory.
func (h *Handler) Close() error { return h.root.Close() }

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		// Reject ".." segments outright rather than letting them be
		// cleaned away: a client asking for them is confused or hostile.
		if containsDotDot(r.URL.Path) {
			http.Error(w, "path outside root", http.StatusBadRequest)
			return
		}
		h.files.ServeHTTP(w, r)
	case http.MethodPut, http.MethodPost:
		if !h.opts.Upload {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "read-only file server (start it with --upload to accept files)", http.StatusMethodNotAllowed)
			return
		}
		if !h.opts.UploadInsecure && !HasBearer(r, h.opts.UploadToken) {
			http.Error(w, "uploads need \"Authorization: Bearer <token>\"", http.StatusUnauthorized)
			return
		}
		h.upload(w, r)
	default:
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

// HasBearer reports whether r carries "Authorization: Bearer <token>"
// (compared in constant time); never for an empty token.
func HasBearer(r *http.Request, token string) bool {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && token != "" && subtle.ConstantTimeCompare([]byte(got), []byte(token)) == 1
}

func containsDotDot(p string) bool {
	for _, seg := range strings.Split(p, "/") {
		if seg == ".." {
			return true
		}
	}
	return false
}

// hidden reports whether a slash path has a segment starting with ".":
// dotfiles, and the ".tmp-*" files and directories of uploads and builds in
// progress, which must never be listed nor served (a half-written file
// would be mirrored as if complete).
func hidden(p string) bool {
	for _, seg := range strings.Split(p, "/") {
		if strings.HasPrefix(seg, ".") && seg != "." {
			return true
		}
	}
	return false
}

// upload writes the body to a temporary file of its own next to the target
// and renames it into place, so a reader never sees half a file and two
// uploads to one path never mix: each rename publishes one whole body, and
// the last upload to complete wins.
func (h *Handler) upload(w http.ResponseWriter, r *http.Request) {
	if containsDotDot(r.URL.Path) || strings.HasSuffix(r.URL.Path, "/") {
		http.Error(w, "bad upload path", http.StatusBadRequest)
		return
	}
	rel := strings.TrimPrefix(path.Clean("/"+r.URL.Path), "/")
	if rel == "" || hidden(rel) {
		http.Error(w, "bad upload path (names starting with \".\" are reserved)", http.StatusBadRequest)
		return
	}
	if dir := path.Dir(rel); dir != "." {
		if err := h.root.MkdirAll(dir, 0o755); err != nil {
			h.fail(w, err)
			return
		}
	}
	tmp, f, err := h.createTemp(path.Dir(rel))
	if err != nil {
		h.fail(w, err)
		return
	}
	n, err := io.Copy(f, http.MaxBytesReader(w, r.Body, h.opts.MaxUpload))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = h.root.Rename(tmp, rel)
	}
	if err != nil {
		_ = h.root.Remove(tmp)
		h.fail(w, err)
		return
	}
	h.opts.Log.Info("file uploaded", "path", rel, "bytes", n, "remote", r.RemoteAddr)
	w.WriteHeader(http.StatusCreated)
}

// createTemp creates ".tmp-upload-<random>" in dir, exclusively.
func (h *Handler) createTemp(dir string) (string, *os.File, error) {
	for {
		var b [8]byte
		_, _ = rand.Read(b[:]) // never fails (crypto/rand)
		name := path.Join(dir, ".tmp-upload-"+hex.EncodeToString(b[:]))
		f, err := h.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if !errors.Is(err, fs.ErrExist) {
			return name, f, err
		}
	}
}

// fail answers an upload error: 403 for a path that leads out of the root,
// 413 for a body over MaxUpload, 500 otherwise.
func (h *Handler) fail(w http.ResponseWriter, err error) {
	var tooBig *http.MaxBytesError
	switch {
	case h.isEscape(err) || errors.Is(err, fs.ErrPermission):
		http.Error(w, "path outside root or not writable", http.StatusForbidden)
	case errors.As(err, &tooBig):
		http.Error(w, fmt.Sprintf("upload over %d bytes", h.opts.MaxUpload), http.StatusRequestEntityTooLarge)
	default:
		h.opts.Log.Error("upload failed", "err", err)
		http.Error(w, "upload failed", http.StatusInternalServerError)
	}
}

func (h *Handler) isEscape(err error) bool { return h.escapes != nil && errors.Is(err, h.escapes) }

// visibleFS is the root as served: hidden paths do not exist, directory
// listings leave them out, and a path that leads out of the root through a
// symlink is a permission error (403), not a server error.
type visibleFS struct{ h *Handler }

func (v visibleFS) Open(name string) (fs.File, error) {
	if hidden(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	f, err := v.h.root.Open(name)
	if err != nil {
		if v.h.isEscape(err) {
			return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrPermission}
		}
		return nil, err
	}
	return visibleFile{f}, nil
}

// visibleFile is an *os.File (so Seek and ReadAt serve Range requests)
// whose directory listing leaves hidden entries out.
type visibleFile struct{ *os.File }

func (f visibleFile) ReadDir(n int) ([]fs.DirEntry, error) {
	for {
		es, err := f.File.ReadDir(n)
		out := es[:0]
		for _, e := range es {
			if !hidden(e.Name()) {
				out = append(out, e)
			}
		}
		// With n > 0 an empty batch means "done" to callers: read on
		// past batches that held only hidden entries.
		if len(out) > 0 || err != nil || n <= 0 || len(es) == 0 {
			return out, err
		}
	}
}
