// Package build turns SequenceFile input into shard dictionaries and
// publishes them atomically as a new version (see package layout).
package build

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/api"
	"github.com/elasticctr/terraform-provider-ctr/cube/atomicfile"
	"github.com/elasticctr/terraform-provider-ctr/cube/dict"
	"github.com/elasticctr/terraform-provider-ctr/cube/layers"
	"github.com/elasticctr/terraform-provider-ctr/cube/layout"
	"github.com/elasticctr/terraform-provider-ctr/cube/seqfile"
)

// Options configure a build.
type Options struct {
	Input  string // file or directory of SequenceFiles (required)
	Output string // root of published versions (required; created if missing)
	Shards int    // number of shards, >= 1 (required); a key's is api.ShardOf(key, Shards)
	Dict   string // dictionary name (required)
	// Base, if set, makes this a delta build: the version under Output that
	// the input patches (upsert). The result is a self-contained dictionary
	// per shard holding base + patch, unless Layered.
	Base string
	// Layered makes a delta build write only the patch's keys: a layer,
	// served over Base (cube server opens the chain of layers down to a
	// version that holds every key), built and shipped in proportion to the
	// patch. Base may be layered itself.
	Layered bool
	// Version overrides the version name. If empty it is "<unix seconds>"
	// for a base and "<depend>_<unix seconds>" for a delta, bumped by one
	// second while the name is taken.
	Version string
	// Seq tunes the SequenceFile reader and holds its limits.
	Seq seqfile.Options
	// AllowEmpty publishes a model even when the input holds no record at
	// all (no files, or only headers), where every key misses. If false,
	// such an input fails with ErrEmptyInput: it is far more often a failed
	// export than a wanted empty model, and rolled out it would blank the
	// served one.
	AllowEmpty bool
	// Now defaults to time.Now.
	Now func() time.Time
	// Log defaults to slog.Default().
	Log *slog.Logger
}

// ErrEmptyInput is the error of a build whose input holds no record while
// Options.AllowEmpty is false.
var ErrEmptyInput = errors.New("no records: refusing to publish a model where every key misses (allow it with --allow-empty)")

// Build reads the input, writes every shard into a temporary directory under
// Output and renames it into place. On error nothing is published. It first
// removes the temporary directories of builds that were killed (see
// layout.RemoveStale); those of builds still running are kept.
func Build(opts Options) (*layout.Manifest, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	start := opts.Now()
	if err := os.MkdirAll(opts.Output, 0o755); err != nil {
		return nil, fmt.Errorf("create output %q: %w", opts.Output, err)
	}
	removeStale(opts)
	m := &layout.Manifest{
		Dict: opts.Dict, Mode: "base", ShardCount: opts.Shards,
		Format: dict.FormatCurrent, Created: start.UTC(), Input: opts.Input,
	}
	var base *layout.Manifest
	if opts.Base != "" {
		var err error
		if base, err = layout.ReadManifest(opts.Output, opts.Base); err != nil {
			return nil, fmt.Errorf("delta build: base version %q: %w", opts.Base, err)
		}
		if base.ShardCount != opts.Shards {
			return nil, fmt.Errorf("delta build: base %q has %d shards, not %d (changing the shard count needs a base build)", opts.Base, base.ShardCount, opts.Shards)
		}
		if base.Dict != opts.Dict {
			return nil, fmt.Errorf("delta build: base %q is dictionary %q, not %q", opts.Base, base.Dict, opts.Dict)
		}
		m.Mode, m.Base, m.Depend, m.Layered = "delta", opts.Base, base.Depend, opts.Layered
	}
	m.Version = opts.Version
	if m.Version == "" {
		m.Version = freeVersion(opts.Output, m.Depend, start.Unix())
	}
	if m.Depend == "" {
		m.Depend = m.Version
	}
	if _, err := os.Stat(filepath.Join(opts.Output, m.Version)); err == nil {
		return nil, fmt.Errorf("version %q already exists in %q", m.Version, opts.Output)
	}

	td, err := layout.CreateTemp(opts.Output, m.Version)
	if err != nil {
		return nil, err
	}
	tmp := td.Path
	published := false
	defer func() {
		if !published {
			_ = os.RemoveAll(tmp)
		}
		td.Close() // after the rename or removal: see layout.TempDir
	}()

	writers := make([]*dict.Writer, opts.Shards)
	defer func() {
		for _, w := range writers {
			if w != nil {
				w.Abort()
			}
		}
	}()
	// Buffers: 1 MiB per shard, but at most ~80 MiB in all.
	bufSize := min(1<<20, (64<<20)/opts.Shards)
	for i := range writers {
		if writers[i], err = dict.NewWriterSize(filepath.Join(tmp, layout.ShardFile(i)), bufSize); err != nil {
			return nil, err
		}
	}
	if base != nil && !opts.Layered {
		if err := addBase(opts.Output, opts.Base, writers); err != nil {
			return nil, err
		}
	}
	if err := readInput(opts, m, writers); err != nil {
		return nil, err
	}
	for i, w := range writers {
		sm, err := finishShard(tmp, m, i, w)
		writers[i] = nil
		if err != nil {
			return nil, err
		}
		m.Shards = append(m.Shards, sm)
	}
	if err := atomicfile.WriteJSON(filepath.Join(tmp, layout.ManifestName), m, publishedFileMode); err != nil {
		return nil, err
	}
	if err := atomicfile.SyncDir(tmp); err != nil {
		return nil, err
	}
	final := filepath.Join(opts.Output, m.Version)
	if err := os.Rename(tmp, final); err != nil {
		return nil, fmt.Errorf("publish %q: %w", final, err)
	}
	published = true
	if err := atomicfile.SyncDir(opts.Output); err != nil {
		return nil, err
	}
	el := opts.Now().Sub(start)
	opts.Log.Info("build published", "dict", m.Dict, "version", m.Version, "mode", m.Mode,
		"shards", m.ShardCount, "records", m.Records, "input_bytes", m.InputBytes,
		"seconds", el.Seconds(), "mb_per_s", float64(m.InputBytes)/1e6/max(el.Seconds(), 1e-9))
	return m, nil
}

// removeStale removes what killed builds left in the output directory. A
// failure there is logged, not fatal: it costs disk space, not correctness.
func removeStale(opts Options) {
	removed, err := layout.RemoveStale(opts.Output)
	for _, p := range removed {
		opts.Log.Info("removed the directory of a build that did not finish", "dir", p)
	}
	if err != nil {
		opts.Log.Warn("removing stale build directories", "output", opts.Output, "err", err)
	}
}

func (o *Options) validate() error {
	switch {
	case o.Input == "":
		return errors.New("build: input is required")
	case o.Output == "":
		return errors.New("build: output is required")
	case o.Shards < 1:
		return fmt.Errorf("build: shards must be >= 1, got %d", o.Shards)
	case o.Dict == "":
		return errors.New("build: dict name is required")
	case o.Layered && o.Base == "":
		return errors.New("build: a layered build needs the base it is layered over")
	}
	if o.Version != "" {
		if _, _, ok := layout.ParseVersion(o.Version); !ok {
			return fmt.Errorf("build: version %q: want <unix seconds> or <depend>_<unix seconds>", o.Version)
		}
	}
	return nil
}

func freeVersion(root, depend string, ts int64) string {
	for ; ; ts++ {
		v := strconv.FormatInt(ts, 10)
		if depend != "" {
			v = depend + "_" + v
		}
		if _, err := os.Stat(filepath.Join(root, v)); errors.Is(err, os.ErrNotExist) {
			if ms, _ := filepath.Glob(filepath.Join(root, layout.TempPrefix+v+"-*")); len(ms) == 0 {
				return v
			}
		}
	}
}

// addBase copies every entry of the base version (with the layers under it,
// if it is layered: this merges them) into the shard writers, so that the
// patch records added after them win (upsert).
func addBase(root, version string, writers []*dict.Writer) error {
	for i, w := range writers {
		d, err := layers.Open(root, version, i, dict.Options{})
		if err != nil {
			return fmt.Errorf("delta build: %w", err)
		}
		var addErr error
		d.Range(func(k uint64, v []byte) bool {
			addErr = w.Add(k, v)
			return addErr == nil
		})
		d.Close()
		if addErr != nil {
			return addErr
		}
	}
	return nil
}

func readInput(opts Options, m *layout.Manifest, writers []*dict.Writer) error {
	files, err := seqfile.Files(opts.Input)
	if err != nil {
		return err
	}
	for _, f := range files {
		if st, err := os.Stat(f); err == nil {
			m.InputBytes += st.Size()
		}
		err := seqfile.ReadFile(f, opts.Seq, func(k uint64, v []byte) error {
			m.Records++
			return writers[api.ShardOf(k, len(writers))].Add(k, v)
		})
		if err != nil {
			return err
		}
	}
	if m.Records == 0 && !opts.AllowEmpty {
		return fmt.Errorf("input %q (%d files): %w", opts.Input, len(files), ErrEmptyInput)
	}
	return nil
}

func finishShard(dir string, m *layout.Manifest, i int, w *dict.Writer) (layout.ShardManifest, error) {
	path := filepath.Join(dir, layout.ShardFile(i))
	st, err := w.Finish()
	if err != nil {
		return layout.ShardManifest{}, err
	}
	if err := os.Chmod(path, publishedFileMode); err != nil {
		return layout.ShardManifest{}, err
	}
	sum, err := atomicfile.SHA256(path)
	if err != nil {
		return layout.ShardManifest{}, err
	}
	sm := layout.ShardManifest{
		Dict: m.Dict, Version: m.Version, Shard: i, ShardCount: m.ShardCount,
		File: layout.ShardFile(i), Count: st.Count, Size: st.FileSize,
		IndexSize: st.IndexSize, ValuesSize: st.ValuesSize, MaxValue: st.MaxValue, SHA256: sum,
	}
	return sm, atomicfile.WriteJSON(filepath.Join(dir, layout.ShardManifestFile(i)), sm, publishedFileMode)
}

// publishedFileMode is the mode of every published file, whatever the
// umask: servers and file servers may run as other users, and a version is
// immutable once published.
const publishedFileMode = 0o644

// VerifyShard checks a shard file against its manifest's size and sha256.
func VerifyShard(path string, sm layout.ShardManifest) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	if st.Size() != sm.Size {
		return fmt.Errorf("shard %q: %d bytes, manifest says %d", path, st.Size(), sm.Size)
	}
	sum, err := atomicfile.SHA256(path)
	if err != nil {
		return err
	}
	if sum != sm.SHA256 {
		return fmt.Errorf("shard %q: sha256 %s, manifest says %s", path, sum, sm.SHA256)
	}
	return nil
}
