// Package fileserver serves a model-output directory over HTTP the way
// Paddle's transfer mirrors it (wget -r over directory listings), with HEAD
// and Range, and optional uploads; it never serves a path outside its root.
package fileserver

import (
	"fmt"
	"io"
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
	// MaxUpload bounds an upload in bytes. If 0, it defaults to 1 GiB.
	MaxUpload int64
	// Log defaults to slog.Default().
	Log *slog.Logger
}

// Handler serves Options.Root.
type Handler struct {
	opts  Options
	root  *os.Root
	files http.Handler
}

// New opens the root. Paths are resolved through os.Root, which refuses
// "..", absolute paths and symlinks that lead out of the root, so a crafted
// URL or a stray symlink cannot expose the rest of the file system.
func New(opts Options) (*Handler, error) {
	if opts.Root == "" {
		return nil, fmt.Errorf("fileserver: root is required")
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
	// http.FileServerFS writes "<pre><a href=...>" listings (what wget -r
	// follows), answers HEAD, Range and If-Modified-Since.
	return &Handler{opts: opts, root: r, files: http.FileServerFS(r.FS())}, nil
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
		h.upload(w, r)
	default:
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

func containsDotDot(p string) bool {
	for _, seg := range strings.Split(p, "/") {
		if seg == ".." {
			return true
		}
	}
	return false
}

// upload writes the body to a temporary file next to the target and renames
// it into place, so a reader never sees half a file.
func (h *Handler) upload(w http.ResponseWriter, r *http.Request) {
	if containsDotDot(r.URL.Path) || strings.HasSuffix(r.URL.Path, "/") {
		http.Error(w, "bad upload path", http.StatusBadRequest)
		return
	}
	rel := strings.TrimPrefix(path.Clean("/"+r.URL.Path), "/")
	if rel == "" {
		http.Error(w, "bad upload path", http.StatusBadRequest)
		return
	}
	if dir := path.Dir(rel); dir != "." {
		if err := h.root.MkdirAll(dir, 0o755); err != nil {
			http.Error(w, err.Error(), http.StatusForbidden)
			return
		}
	}
	tmp := path.Join(path.Dir(rel), ".upload-"+path.Base(rel))
	f, err := h.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		http.Error(w, err.Error(), http.StatusForbidden)
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
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	h.opts.Log.Info("file uploaded", "path", rel, "bytes", n, "remote", r.RemoteAddr)
	w.WriteHeader(http.StatusCreated)
}
