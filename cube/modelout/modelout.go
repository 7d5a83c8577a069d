// Package modelout publishes a model version into a model-output directory
// the way the cube's transfer reads it: SequenceFiles in Paddle's layout
// under data/<id>/, and one donefile line (donefile/base.txt, or patch.txt)
// that names them; optionally the serving model of the same version under serving/<id>/.
//
// Publishing is all or nothing. The files are written into a hidden
// temporary folder under data/ (the transfer and the file server's listings
// skip names starting with "."), synced, and renamed to data/<id> in one
// step; only then is the donefile replaced, by a temporary file and a rename,
// with its old lines and the new one. A process that dies at any point
// leaves either no version or a whole one, never a donefile line that names
// missing or partial data. Writers of one directory are serialised by a lock.
package modelout

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/atomicfile"
	"github.com/elasticctr/terraform-provider-ctr/cube/donefile"
	"github.com/elasticctr/terraform-provider-ctr/cube/seqfile"
)

// DefaultPartBytes is where a SequenceFile part ends and the next begins.
const DefaultPartBytes = 1 << 30

// Version names what to publish.
type Version struct {
	// ID is the donefile id, a decimal number (by convention unix seconds).
	// It must be above every id of its donefile. Empty means now, or one
	// above the donefile's largest id if that is not above it; it is chosen
	// at Commit, under the lock, so concurrent writers never collide.
	ID string
	// PatchOf, if set, makes this a patch of that base (patch.txt).
	PatchOf string
	// PartBytes starts a new part-NNNNN file after this many bytes of
	// records (0: DefaultPartBytes).
	PartBytes int64
}

// Writer writes one version's records. Call Commit to publish it, or Abort.
type Writer struct {
	root, tmp string
	// servingTmp holds the serving model copied by AddServingModel (empty: none), and
	// servingArchiveTmp the same folder as a .tar.gz.
	servingTmp, servingArchiveTmp string
	v                             Version
	f                             *os.File
	w                             *seqfile.Writer
	parts                         int
	inPart                        int64
	width                         int
	Stats                         Stats
}

// Stats count what a Writer wrote.
type Stats struct {
	Records, Bytes int64
	Parts          int
}

// Begin starts a version in root (the model-output directory: the folder
// the training file server serves).
func Begin(root string, v Version) (*Writer, error) {
	if _, err := strconv.ParseUint(v.ID, 10, 63); v.ID != "" && err != nil {
		return nil, fmt.Errorf("version id %q: want a decimal number (unix seconds by convention)", v.ID)
	}
	if v.PatchOf != "" {
		if _, err := strconv.ParseUint(v.PatchOf, 10, 63); err != nil {
			return nil, fmt.Errorf("patch of %q: want the decimal id of a base", v.PatchOf)
		}
	}
	if v.PartBytes <= 0 {
		v.PartBytes = DefaultPartBytes
	}
	data := filepath.Join(root, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, err
	}
	if err := unused(data, v.ID); v.ID != "" && err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(data, ".tmp-export-")
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		os.RemoveAll(tmp)
		return nil, err
	}
	return &Writer{root: root, tmp: tmp, v: v}, nil
}

// Append writes one record. Every value of a version has the same size.
func (w *Writer) Append(key uint64, value []byte) error {
	if w.Stats.Records == 0 {
		w.width = len(value)
	} else if len(value) != w.width {
		return fmt.Errorf("record %d (key %d): %d bytes, but the version's values have %d", w.Stats.Records, key, len(value), w.width)
	}
	if w.f == nil || w.inPart >= w.v.PartBytes {
		if err := w.closePart(); err != nil {
			return err
		}
		f, err := os.OpenFile(filepath.Join(w.tmp, fmt.Sprintf("part-%05d", w.parts)), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		var sync [16]byte
		copy(sync[:], fmt.Sprintf("ctr%013d", w.parts))
		sw, err := seqfile.NewWriter(f, sync)
		if err != nil {
			f.Close()
			return err
		}
		w.f, w.w, w.inPart = f, sw, 0
		w.parts++
	}
	if err := w.w.Append(key, value); err != nil {
		return fmt.Errorf("write %s: %w", w.f.Name(), err)
	}
	n := int64(16 + len(value))
	w.inPart += n
	w.Stats.Records++
	w.Stats.Bytes += n
	return nil
}

func (w *Writer) closePart() error {
	if w.f == nil {
		return nil
	}
	err := w.w.Close()
	if err == nil {
		err = w.f.Sync()
	}
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	w.f = nil
	if err != nil {
		return fmt.Errorf("write part: %w", err)
	}
	return nil
}

// Abort removes what was written.
func (w *Writer) Abort() {
	if w.f != nil {
		w.f.Close()
		w.f = nil
	}
	os.RemoveAll(w.tmp)
	if w.servingTmp != "" {
		os.RemoveAll(w.servingTmp)
	}
	if w.servingArchiveTmp != "" {
		os.Remove(w.servingArchiveTmp)
	}
}

// Bounds of a serving model copied by AddServingModel.
const (
	MaxServingFiles = 10_000
	MaxServingBytes = 64 << 30
)

// AddServingModel copies the serving model directory src (the dense network and its
// configuration, what Paddle Serving loads) into the version: Commit publishes it as
// serving/<id>/ beside data/<id>/, and as serving/<id>.tar.gz (the folder "model/" in a
// gzipped tar: what `cube serving` fetches), before the donefile line, so that the dense model and the
// sparse table of a version carry the same id. Only regular files and folders are copied.
func (w *Writer) AddServingModel(src string) error {
	dir := filepath.Join(w.root, "serving")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(dir, ".tmp-export-")
	if err != nil {
		return err
	}
	w.servingTmp = tmp
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	files, size := 0, int64(0)
	err = filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("serving model: %w", err)
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(tmp, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(to, 0o755)
		case !d.Type().IsRegular():
			return fmt.Errorf("serving model: %s is not a regular file", p)
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if files++; files > MaxServingFiles {
			return fmt.Errorf("serving model %s: more than %d files", src, MaxServingFiles)
		}
		if size += info.Size(); size > MaxServingBytes {
			return fmt.Errorf("serving model %s: more than %d bytes", src, int64(MaxServingBytes))
		}
		return copyFile(p, to)
	})
	if err != nil {
		return err
	}
	archive, err := os.CreateTemp(dir, ".tmp-export-*.tar.gz")
	if err != nil {
		return err
	}
	w.servingArchiveTmp = archive.Name()
	err = writeArchive(archive, tmp, "model")
	if cerr := archive.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(w.servingArchiveTmp, 0o644)
	}
	return err
}

// writeArchive writes the folder dir as a gzipped tar whose entries sit below prefix/:
// folders and regular files only, with their sizes, in a stable order.
func writeArchive(f *os.File, dir, prefix string) error {
	zw := gzip.NewWriter(f)
	tw := tar.NewWriter(zw)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		name := path.Join(prefix, filepath.ToSlash(rel))
		info, err := d.Info()
		if err != nil {
			return err
		}
		if d.IsDir() {
			return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: 0o755, ModTime: info.ModTime()})
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: info.Size(), ModTime: info.ModTime()}); err != nil {
			return err
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		_, err = io.Copy(tw, in)
		return err
	})
	if err == nil {
		err = tw.Close()
	}
	if err == nil {
		err = zw.Close()
	}
	if err == nil {
		err = f.Sync()
	}
	return err
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("copy %s: %w", from, err)
	}
	return nil
}

// Commit publishes the version: data/<id> appears whole, then the donefile
// gains its line. It returns the line.
func (w *Writer) Commit() (donefile.Entry, error) {
	fail := func(err error) (donefile.Entry, error) {
		w.Abort()
		return donefile.Entry{}, err
	}
	if w.Stats.Records == 0 {
		return fail(errors.New("no records; nothing is published"))
	}
	if err := w.closePart(); err != nil {
		return fail(err)
	}
	w.Stats.Parts = w.parts
	if err := atomicfile.SyncDir(w.tmp); err != nil {
		return fail(err)
	}
	dir := filepath.Join(w.root, "donefile")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fail(err)
	}
	unlock, err := lock(filepath.Join(dir, ".lock"))
	if err != nil {
		return fail(err)
	}
	defer unlock()
	name, key := "base.txt", w.v.ID
	if w.v.PatchOf != "" {
		name, key = "patch.txt", w.v.PatchOf
	}
	path := filepath.Join(dir, name)
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fail(err)
	}
	if len(old) > donefile.MaxSize {
		return fail(fmt.Errorf("%s: %d bytes, over the %d the transfer reads", path, len(old), donefile.MaxSize))
	}
	// The transfer follows the last line, so an id not above every id already there would
	// roll an older model out over a newer one, or be ambiguous.
	largest, found := largestID(old)
	if w.v.ID == "" {
		n := uint64(time.Now().Unix())
		if found && largest >= n {
			n = largest + 1
		}
		w.v.ID = strconv.FormatUint(n, 10)
		if w.v.PatchOf == "" {
			key = w.v.ID
		}
	}
	if n, _ := strconv.ParseUint(w.v.ID, 10, 63); found && n <= largest {
		return fail(fmt.Errorf("version id %s: %s already has id %d; a new version needs a larger id", w.v.ID, path, largest))
	}
	if err := unused(filepath.Join(w.root, "data"), w.v.ID); err != nil {
		return fail(err)
	}
	if w.servingTmp != "" {
		serving := filepath.Join(w.root, "serving", w.v.ID)
		if err := unused(filepath.Dir(serving), w.v.ID); err != nil {
			return fail(err)
		}
		if err := os.Rename(w.servingTmp, serving); err != nil {
			return fail(fmt.Errorf("publish %s: %w", serving, err))
		}
		w.servingTmp = ""
		if err := os.Rename(w.servingArchiveTmp, serving+".tar.gz"); err != nil {
			os.RemoveAll(serving)
			return fail(fmt.Errorf("publish %s.tar.gz: %w", serving, err))
		}
		w.servingArchiveTmp = ""
		if err := atomicfile.SyncDir(filepath.Dir(serving)); err != nil {
			return fail(err)
		}
	}
	final := filepath.Join(w.root, "data", w.v.ID)
	if err := os.Rename(w.tmp, final); err != nil {
		os.RemoveAll(filepath.Join(w.root, "serving", w.v.ID)) // no line names it: take it back
		os.Remove(filepath.Join(w.root, "serving", w.v.ID+".tar.gz"))
		return fail(fmt.Errorf("publish %s: %w", final, err))
	}
	if err := atomicfile.SyncDir(filepath.Dir(final)); err != nil {
		return donefile.Entry{}, err
	}
	// The input is relative to the donefile's folder, so the line is right
	// wherever the output folder is served (a file server's root, or below
	// a training job's model volume mount).
	e := donefile.Entry{ID: w.v.ID, Key: key, Input: "../data/" + w.v.ID}
	line, _ := json.Marshal(e) // plain strings: cannot fail
	if len(old) > 0 && !bytes.HasSuffix(old, []byte("\n")) {
		old = append(old, '\n')
	}
	if err := atomicfile.WriteFile(path, append(append(old, line...), '\n'), 0o644); err != nil {
		return donefile.Entry{}, fmt.Errorf("version %s is in %s, but its donefile line could not be written: %w", w.v.ID, final, err)
	}
	return e, nil
}

// unused refuses an id whose data folder exists: a published version is never rewritten.
func unused(data, id string) error {
	if _, err := os.Lstat(filepath.Join(data, id)); err == nil {
		return fmt.Errorf("version %s: %s already exists; a published version is never rewritten (choose another id)", id, filepath.Join(data, id))
	}
	return nil
}

// largestID is the largest id of a donefile's lines, if any.
func largestID(donefileText []byte) (uint64, bool) {
	var largest uint64
	found := false
	es, _ := donefile.Parse(donefileText)
	for _, e := range es {
		if m, err := strconv.ParseUint(e.ID, 10, 63); err == nil && (!found || m > largest) {
			largest, found = m, true
		}
	}
	return largest, found
}

func lock(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}
