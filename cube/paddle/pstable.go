package paddle

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Paddle 2.x's parameter servers save a sparse table as text shards, one
// line per key. Two layouts exist (paddle-serving.md §5):
//
//   - CommonSparseTable (2.0–2.2): <dir>/<table>_txt/<table>.block<N>.txt with
//     <table>.block<N>.meta beside it (param=, shard_id=, row_names=,
//     row_dims=, count=). A line is "id\tcount\tunseen_days\tis_entry\tv,v,…,"
//     with every row_names column's values, in order, after the fourth tab;
//     some releases write "id\tcol0\tcol1\t…" instead, one comma-joined column
//     per row name. The embedding is the column named Param.
//   - MemorySparseTable (2.3+): <dir>/<table_id %03d>/part-<pserver %03d>-<shard %05d>
//     (".gz" when compressed). A line is "key f f f …" in CtrCommonAccessor's
//     order: slot, unseen_days, delta_score, show, click, embed_w,
//     embed_g2sum × embed_sgd_dim, and then, only for keys whose show/click
//     score passed embedx_threshold, embedx_w × embedx_dim and
//     embedx_g2sum × embedx_sgd_dim (ctr_accessor.h). A key without the
//     embedx groups has a zero embedx.

// MaxLineBytes bounds one text line (a 1,000-wide Adam row is under 40 KB).
const MaxLineBytes = 4 << 20

// TableRows streams (key, value) rows: value is little-endian float32s, valid
// until the next call; io.EOF after the last row.
type TableRows interface {
	Next() (uint64, []byte, error)
}

// CommonMeta is a CommonSparseTable shard's .meta file.
type CommonMeta struct {
	Param string
	Names []string
	Dims  []int
	Count uint64
}

// ParseCommonMeta reads a .meta file's key=value lines ('#' starts a comment).
func ParseCommonMeta(b []byte) (CommonMeta, error) {
	var m CommonMeta
	var haveNames, haveDims bool
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return m, fmt.Errorf("line %d: want key=value, got %q", i+1, line)
		}
		switch k {
		case "param":
			m.Param = v
		case "row_names":
			m.Names, haveNames = strings.Split(v, ","), true
		case "row_dims":
			haveDims = true
			for _, d := range strings.Split(v, ",") {
				n, err := strconv.Atoi(d)
				if err != nil || n < 1 || n > 1<<20 {
					return m, fmt.Errorf("line %d: row_dims %q: want positive integers", i+1, v)
				}
				m.Dims = append(m.Dims, n)
			}
		case "count":
			c, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return m, fmt.Errorf("line %d: count %q: %v", i+1, v, err)
			}
			m.Count = c
		}
	}
	if !haveNames || !haveDims || len(m.Names) != len(m.Dims) {
		return m, fmt.Errorf("want row_names and row_dims of the same length, got %d names and %d dims", len(m.Names), len(m.Dims))
	}
	if len(m.Names) > 64 {
		return m, fmt.Errorf("%d row names: at most 64", len(m.Names))
	}
	return m, nil
}

// param returns the offset and width of the Param column (the first column
// when none is named Param) within a row's values, and the row's total width.
func (m CommonMeta) param() (off, dim, total int) {
	idx := max(slices.Index(m.Names, "Param"), 0)
	for i, d := range m.Dims {
		if i < idx {
			off += d
		}
		total += d
	}
	return off, m.Dims[idx], total
}

// lineReader reads bounded lines and names the file and line in errors.
type lineReader struct {
	name string
	sc   *bufio.Scanner
	line int
	out  []byte
	vals []float32
}

func newLineReader(name string, r io.Reader) *lineReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxLineBytes)
	return &lineReader{name: name, sc: sc}
}

func (l *lineReader) next() ([]byte, error) {
	for l.sc.Scan() {
		l.line++
		if b := bytes.TrimRight(l.sc.Bytes(), "\r"); len(b) > 0 {
			return b, nil
		}
	}
	if err := l.sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("%s: line %d: longer than %d bytes", l.name, l.line+1, MaxLineBytes)
		}
		return nil, fmt.Errorf("%s: line %d: %w", l.name, l.line+1, err)
	}
	return nil, io.EOF
}

func (l *lineReader) errorf(format string, args ...any) error {
	return fmt.Errorf("%s: line %d: %s", l.name, l.line, fmt.Sprintf(format, args...))
}

func (l *lineReader) encode(vals []float32) []byte {
	l.out = l.out[:0]
	for _, v := range vals {
		l.out = binary.LittleEndian.AppendUint32(l.out, math.Float32bits(v))
	}
	return l.out
}

// parseFloats parses comma- or space-separated float32s (empty fields, as a
// trailing comma leaves, are skipped) into l.vals.
func (l *lineReader) parseFloats(s []byte, sep byte) error {
	for _, f := range bytes.Split(s, []byte{sep}) {
		if len(f) == 0 {
			continue
		}
		if len(l.vals) >= MaxLineBytes/2 {
			return l.errorf("too many values")
		}
		v, err := strconv.ParseFloat(string(f), 32)
		if err != nil {
			return l.errorf("value %q: not a number", f)
		}
		l.vals = append(l.vals, float32(v))
	}
	return nil
}

// CommonRows streams a CommonSparseTable text shard's Param column.
type CommonRows struct {
	l               *lineReader
	meta            CommonMeta
	off, dim, total int
}

// NewCommonRows reads the shard r (named name in errors) described by meta.
func NewCommonRows(name string, r io.Reader, meta CommonMeta) *CommonRows {
	off, dim, total := meta.param()
	return &CommonRows{l: newLineReader(name, r), meta: meta, off: off, dim: dim, total: total}
}

// Next returns the next key and its Param values.
func (c *CommonRows) Next() (uint64, []byte, error) {
	line, err := c.l.next()
	if err != nil {
		return 0, nil, err
	}
	cols := bytes.Split(line, []byte{'\t'})
	for len(cols) > 1 && len(cols[len(cols)-1]) == 0 {
		cols = cols[:len(cols)-1]
	}
	key, err := strconv.ParseUint(string(cols[0]), 10, 64)
	if err != nil {
		return 0, nil, c.l.errorf("id %q: want an unsigned integer", cols[0])
	}
	c.l.vals = c.l.vals[:0]
	switch {
	case len(cols) == 5 && len(c.meta.Names) != 4:
		// id, count, unseen_days, is_entry, then every column's values.
		err = c.l.parseFloats(cols[4], ',')
	case len(cols) == 1+len(c.meta.Names):
		for _, col := range cols[1:] {
			if err = c.l.parseFloats(col, ','); err != nil {
				break
			}
		}
	default:
		return 0, nil, c.l.errorf("%d tab-separated fields: want 5 (id, count, unseen_days, is_entry, values) or %d (id and one per row name %v)", len(cols), 1+len(c.meta.Names), c.meta.Names)
	}
	if err != nil {
		return 0, nil, err
	}
	if len(c.l.vals) != c.total {
		return 0, nil, c.l.errorf("%d values: the meta's row_dims %v add up to %d", len(c.l.vals), c.meta.Dims, c.total)
	}
	return key, c.l.encode(c.l.vals[c.off : c.off+c.dim]), nil
}

// CtrLayout says how CtrCommonAccessor laid a MemorySparseTable's values out
// (the table's accessor config: embedx_dim, and the dims of its SGD rules'
// state: 1 for the naive and adagrad rules).
type CtrLayout struct {
	EmbedxDim, EmbedSGDDim, EmbedxSGDDim int
	// Pull, if set, exports what a trainer's pull returns (show, click,
	// embed_w, embedx_w…: CtrCommonPullValue); otherwise embed_w, embedx_w….
	Pull bool
}

// Width is the number of float32s exported per key.
func (c CtrLayout) Width() int {
	if c.Pull {
		return 3 + c.EmbedxDim
	}
	return 1 + c.EmbedxDim
}

// Check refuses a layout that cannot be.
func (c CtrLayout) Check() error {
	if c.EmbedxDim < 0 || c.EmbedSGDDim < 1 || c.EmbedxSGDDim < 0 || c.EmbedxDim > 1<<16 || c.EmbedSGDDim > 1<<16 || c.EmbedxSGDDim > 1<<18 {
		return fmt.Errorf("accessor layout embedx_dim %d, embed_sgd_dim %d, embedx_sgd_dim %d: want embedx_dim ≥ 0, embed_sgd_dim ≥ 1, embedx_sgd_dim ≥ 0", c.EmbedxDim, c.EmbedSGDDim, c.EmbedxSGDDim)
	}
	return nil
}

// The fixed fields before embed_g2sum: slot, unseen_days, delta_score, show, click, embed_w.
const ctrFixed = 6

// MemoryRows streams a MemorySparseTable shard.
type MemoryRows struct {
	l      *lineReader
	layout CtrLayout
	row    []float32
}

// NewMemoryRows reads the shard r (named name in errors).
func NewMemoryRows(name string, r io.Reader, layout CtrLayout) *MemoryRows {
	return &MemoryRows{l: newLineReader(name, r), layout: layout, row: make([]float32, layout.Width())}
}

// Next returns the next key and its exported values.
func (m *MemoryRows) Next() (uint64, []byte, error) {
	line, err := m.l.next()
	if err != nil {
		return 0, nil, err
	}
	keyField, rest, _ := bytes.Cut(line, []byte{' '})
	key, err := strconv.ParseUint(string(keyField), 10, 64)
	if err != nil {
		return 0, nil, m.l.errorf("key %q: want an unsigned integer", keyField)
	}
	m.l.vals = m.l.vals[:0]
	if err := m.l.parseFloats(rest, ' '); err != nil {
		return 0, nil, err
	}
	c, v := m.layout, m.l.vals
	short, full := ctrFixed+c.EmbedSGDDim, ctrFixed+c.EmbedSGDDim+c.EmbedxDim+c.EmbedxSGDDim
	if len(v) != short && len(v) != full {
		return 0, nil, m.l.errorf("%d values: CtrCommonAccessor with embedx_dim %d, embed_sgd_dim %d, embedx_sgd_dim %d writes %d (no embedx yet) or %d", len(v), c.EmbedxDim, c.EmbedSGDDim, c.EmbedxSGDDim, short, full)
	}
	out := m.row[:0]
	if c.Pull {
		out = append(out, v[3], v[4]) // show, click
	}
	out = append(out, v[5]) // embed_w
	if len(v) == full {
		out = append(out, v[short:short+c.EmbedxDim]...)
	} else {
		for range c.EmbedxDim {
			out = append(out, 0)
		}
	}
	return key, m.l.encode(out), nil
}

var (
	commonShard = regexp.MustCompile(`^(.+)\.block(\d+)\.txt$`)
	memoryShard = regexp.MustCompile(`^part-\d+-\d+(\.gz)?$`)
)

// TableShards lists a saved table's text shards in dir, in name order, and
// says which layout they have: "common" (each *.blockN.txt with its .meta) or
// "memory" (part-NNN-NNNNN[.gz]). A folder with both, or neither, is an error.
func TableShards(dir string) (layout string, files []string, err error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return "", nil, err
	}
	var common, memory []string
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		switch n := e.Name(); {
		case commonShard.MatchString(n):
			common = append(common, filepath.Join(dir, n))
		case memoryShard.MatchString(n):
			memory = append(memory, filepath.Join(dir, n))
		}
	}
	switch {
	case len(common) > 0 && len(memory) > 0:
		return "", nil, fmt.Errorf("%s holds both CommonSparseTable (*.blockN.txt) and MemorySparseTable (part-*) shards: name the one table's folder", dir)
	case len(common) > 0:
		return "common", common, nil
	case len(memory) > 0:
		return "memory", memory, nil
	}
	return "", nil, fmt.Errorf("%s: no sparse-table shards (<table>.blockN.txt with .meta, or part-NNN-NNNNN[.gz])", dir)
}

// CommonMetaPath is the .meta file beside a CommonSparseTable shard.
func CommonMetaPath(shard string) string {
	return strings.TrimSuffix(shard, ".txt") + ".meta"
}

// OpenShard opens a shard for reading, decompressing ".gz" (with the bound
// of MaxLineBytes per line, the decompressed size is only as large as the
// number of lines asks).
func OpenShard(path string) (io.ReadCloser, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	if !strings.HasSuffix(path, ".gz") {
		return f, nil
	}
	z, err := gzip.NewReader(bufio.NewReader(f))
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return struct {
		io.Reader
		io.Closer
	}{z, f}, nil
}
