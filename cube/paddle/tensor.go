// Package paddle reads what Paddle saves, so that no step between training
// and the cube needs Paddle installed: LoDTensor persistables (one file per
// variable, or the combined __params__ / .pdiparams form), SelectedRows
// sparse tables, the persistable variables of a ProgramDesc (to name the
// tensors of a combined file), and the text shards of Paddle 2.x's
// parameter-server sparse tables (pstable.go).
//
// The layouts are those of ../shared/reference/paddle-serving.md §5 (Paddle's
// lod_tensor.cc SerializeToStream, tensor_util.cc TensorToStream,
// selected_rows.cc, framework.proto): every integer little-endian (x86 hosts),
// a TensorDesc protobuf of (data_type, dims), then the raw row-major data.
//
// Files are hostile input: every length and count is checked against the
// bytes left in the file before anything is allocated or skipped, the sizes
// a header implies must fit in int64, and a file must be consumed exactly.
// Data are never loaded whole: a Tensor says where its data start, and Rows
// streams them a row at a time.
package paddle

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
)

// DType is Paddle's VarType.Type of a tensor's elements (framework.proto).
type DType int32

// The element types Paddle saves.
const (
	Bool       DType = 0
	Int16      DType = 1
	Int32      DType = 2
	Int64      DType = 3
	FP16       DType = 4
	FP32       DType = 5
	FP64       DType = 6
	SizeT      DType = 19
	UInt8      DType = 20
	Int8       DType = 21
	BF16       DType = 22
	Complex64  DType = 23
	Complex128 DType = 24
)

var dtypes = map[DType]struct {
	name string
	size int
}{
	Bool: {"BOOL", 1}, Int16: {"INT16", 2}, Int32: {"INT32", 4}, Int64: {"INT64", 8},
	FP16: {"FP16", 2}, FP32: {"FP32", 4}, FP64: {"FP64", 8}, SizeT: {"SIZE_T", 8},
	UInt8: {"UINT8", 1}, Int8: {"INT8", 1}, BF16: {"BF16", 2},
	Complex64: {"COMPLEX64", 8}, Complex128: {"COMPLEX128", 16},
}

// Size is the bytes of one element, 0 for a type that is not a tensor element.
func (d DType) Size() int { return dtypes[d].size }

func (d DType) String() string {
	if t, ok := dtypes[d]; ok {
		return t.name
	}
	return fmt.Sprintf("type %d", int32(d))
}

// Limits bound what a header may ask for. Paddle itself has no such bounds;
// these are far above any real model and far below what would exhaust memory.
const (
	// MaxDims is the most dimensions a tensor may have.
	MaxDims = 16
	// MaxDescBytes bounds a TensorDesc (a real one is under 40 bytes).
	MaxDescBytes = 1 << 10
	// MaxLoDLevels bounds a LoDTensor's LoD levels (parameters have none).
	MaxLoDLevels = 8
	// MaxLoDBytes bounds the offsets of one LoD level held in memory.
	MaxLoDBytes = 64 << 20
)

// Tensor is one tensor record of a file: its header, and where its data are.
type Tensor struct {
	DType DType
	Dims  []int64
	// LoD holds the offsets of each LoD level (nil for a plain tensor).
	LoD [][]uint64
	// Start is the record's first byte in the file; Data the first byte of
	// its data, Bytes how many there are, and End = Data + Bytes.
	Start, Data, Bytes int64
}

// End is the offset of the first byte after the record.
func (t Tensor) End() int64 { return t.Data + t.Bytes }

// Rows is the first dimension (1 for a scalar), RowBytes the bytes of one row.
func (t Tensor) Rows() int64 {
	if len(t.Dims) == 0 {
		return 1
	}
	return t.Dims[0]
}

// RowBytes is the bytes of one row: the product of every dimension but the
// first, times the element size.
func (t Tensor) RowBytes() int64 {
	if t.Rows() == 0 {
		return 0
	}
	return t.Bytes / t.Rows()
}

func (t Tensor) String() string {
	return fmt.Sprintf("%s %v", t.DType, t.Dims)
}

// File reads records from a file of known size. Errors name the file and the
// byte offset.
type File struct {
	Name string
	r    io.ReaderAt
	size int64
}

// NewFile reads r, which holds size bytes, naming it name in errors.
func NewFile(name string, r io.ReaderAt, size int64) *File {
	return &File{Name: name, r: r, size: size}
}

// Size is the file's size in bytes.
func (f *File) Size() int64 { return f.size }

// FormatError says what is wrong with a file, and where.
type FormatError struct {
	File   string
	Offset int64
	Reason string
}

func (e *FormatError) Error() string {
	return fmt.Sprintf("%s: offset %d: %s", e.File, e.Offset, e.Reason)
}

func (f *File) errorf(off int64, format string, args ...any) error {
	return &FormatError{File: f.Name, Offset: off, Reason: fmt.Sprintf(format, args...)}
}

// cursor reads little-endian fields from a File, checking every length
// against the bytes left.
type cursor struct {
	f   *File
	off int64
	buf [8]byte
}

func (c *cursor) left() int64 { return c.f.size - c.off }

func (c *cursor) read(n int, what string) ([]byte, error) {
	if int64(n) > c.left() {
		return nil, c.f.errorf(c.off, "%s: want %d bytes, %d left (truncated file?)", what, n, max(c.left(), 0))
	}
	var b []byte
	if n <= len(c.buf) {
		b = c.buf[:n]
	} else {
		b = make([]byte, n)
	}
	if _, err := c.f.r.ReadAt(b, c.off); err != nil {
		return nil, c.f.errorf(c.off, "%s: %v", what, err)
	}
	c.off += int64(n)
	return b, nil
}

func (c *cursor) u32(what string) (uint32, error) {
	b, err := c.read(4, what)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b), nil
}

// version0 reads the u32 version that starts a record of kind, which Paddle always writes as
// 0; hint ends the error about any other.
func (c *cursor) version0(kind, hint string) error {
	at := c.off
	v, err := c.u32(kind + " version")
	if err == nil && v != 0 {
		err = c.f.errorf(at, "%s version %d: Paddle writes 0%s", kind, v, hint)
	}
	return err
}

func (c *cursor) u64(what string) (uint64, error) {
	b, err := c.read(8, what)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

// LoDTensorAt reads the header of the LoDTensor record at off: u32 version
// (0), u64 LoD level count, each level's u64 byte length and offsets, then
// the tensor (see TensorAt).
func (f *File) LoDTensorAt(off int64) (Tensor, error) {
	c := &cursor{f: f, off: off}
	if err := c.version0("LoDTensor", " (is this a LoDTensor file?)"); err != nil {
		return Tensor{}, err
	}
	levels, err := c.u64("LoD level count")
	if err != nil {
		return Tensor{}, err
	}
	if levels > MaxLoDLevels {
		return Tensor{}, f.errorf(c.off-8, "%d LoD levels: at most %d", levels, MaxLoDLevels)
	}
	var lod [][]uint64
	for l := range int(levels) {
		n, err := c.u64(fmt.Sprintf("LoD level %d length", l))
		if err != nil {
			return Tensor{}, err
		}
		if n%8 != 0 || n > MaxLoDBytes || int64(n) > c.left() {
			return Tensor{}, f.errorf(c.off-8, "LoD level %d: %d bytes: want a multiple of 8, at most %d and within the file (%d left)", l, n, MaxLoDBytes, c.left())
		}
		b, err := c.read(int(n), fmt.Sprintf("LoD level %d", l))
		if err != nil {
			return Tensor{}, err
		}
		offs := make([]uint64, n/8)
		for i := range offs {
			offs[i] = binary.LittleEndian.Uint64(b[8*i:])
		}
		lod = append(lod, offs)
	}
	t, err := f.tensorAt(c)
	if err != nil {
		return Tensor{}, err
	}
	t.Start, t.LoD = off, lod
	return t, nil
}

// TensorAt reads the header of the plain tensor record at off (as a
// SelectedRows holds its values): u32 version (0), i32 size of the
// TensorDesc, the TensorDesc; the data follow.
func (f *File) TensorAt(off int64) (Tensor, error) {
	t, err := f.tensorAt(&cursor{f: f, off: off})
	t.Start = off
	return t, err
}

func (f *File) tensorAt(c *cursor) (Tensor, error) {
	if err := c.version0("tensor", ""); err != nil {
		return Tensor{}, err
	}
	n, err := c.u32("TensorDesc size")
	if err != nil {
		return Tensor{}, err
	}
	if int32(n) <= 0 || n > MaxDescBytes {
		return Tensor{}, f.errorf(c.off-4, "TensorDesc size %d: want 1-%d bytes", int32(n), MaxDescBytes)
	}
	descAt := c.off
	b, err := c.read(int(n), "TensorDesc")
	if err != nil {
		return Tensor{}, err
	}
	dt, dims, err := parseTensorDesc(b)
	if err != nil {
		return Tensor{}, f.errorf(descAt, "TensorDesc: %v", err)
	}
	size := dt.Size()
	if size == 0 {
		return Tensor{}, f.errorf(descAt, "TensorDesc: data type %s is not a tensor element type", dt)
	}
	bytes, ok := numBytes(dims, size)
	if !ok {
		return Tensor{}, f.errorf(descAt, "dims %v: want each ≥ 0 and a size that fits in 63 bits", dims)
	}
	if bytes > c.left() {
		return Tensor{}, f.errorf(c.off, "%s %v needs %d data bytes, the file has %d left (truncated file?)", dt, dims, bytes, c.left())
	}
	return Tensor{DType: dt, Dims: dims, Data: c.off, Bytes: bytes}, nil
}

// numBytes is the product of dims times size, or false if a dimension is
// negative or the product overflows int64.
func numBytes(dims []int64, size int) (int64, bool) {
	n := uint64(size)
	for _, d := range dims {
		if d < 0 {
			return 0, false
		}
		hi, lo := bits.Mul64(n, uint64(d))
		if hi != 0 || lo > math.MaxInt64 {
			return 0, false
		}
		n = lo
	}
	return int64(n), true
}

// parseTensorDesc decodes VarType.TensorDesc: required data_type = 1 (enum),
// repeated int64 dims = 2 (unpacked as Paddle writes it; packed accepted).
func parseTensorDesc(b []byte) (DType, []int64, error) {
	var (
		dt     DType
		haveDT bool
		dims   []int64
	)
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0, nil, protowire.ParseError(n)
		}
		b = b[n:]
		switch {
		case num == 1 && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return 0, nil, protowire.ParseError(n)
			}
			dt, haveDT, b = DType(int32(v)), true, b[n:]
		case num == 2 && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return 0, nil, protowire.ParseError(n)
			}
			dims, b = append(dims, int64(v)), b[n:]
		case num == 2 && typ == protowire.BytesType:
			p, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return 0, nil, protowire.ParseError(n)
			}
			b = b[n:]
			for len(p) > 0 {
				v, m := protowire.ConsumeVarint(p)
				if m < 0 {
					return 0, nil, protowire.ParseError(m)
				}
				dims, p = append(dims, int64(v)), p[m:]
			}
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return 0, nil, protowire.ParseError(n)
			}
			b = b[n:]
		}
		if len(dims) > MaxDims {
			return 0, nil, fmt.Errorf("more than %d dims", MaxDims)
		}
	}
	if !haveDT {
		return 0, nil, errors.New("no data_type (field 1 is required)")
	}
	return dt, dims, nil
}

// AppendLoDTensorHeader appends the header of a LoDTensor record exactly as
// Paddle writes it (version 0, the LoD levels, tensor version 0, the
// TensorDesc with dims unpacked); the record's little-endian data follow it.
// Stand-in trainers use it to save what Paddle saves.
func AppendLoDTensorHeader(b []byte, dt DType, dims []int64, lod [][]uint64) []byte {
	b = binary.LittleEndian.AppendUint32(b, 0)
	b = binary.LittleEndian.AppendUint64(b, uint64(len(lod)))
	for _, l := range lod {
		b = binary.LittleEndian.AppendUint64(b, uint64(8*len(l)))
		for _, o := range l {
			b = binary.LittleEndian.AppendUint64(b, o)
		}
	}
	b = binary.LittleEndian.AppendUint32(b, 0)
	desc := tensorDesc(dt, dims)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(desc)))
	return append(b, desc...)
}

func tensorDesc(dt DType, dims []int64) []byte {
	var desc []byte
	desc = protowire.AppendTag(desc, 1, protowire.VarintType)
	desc = protowire.AppendVarint(desc, uint64(dt))
	for _, d := range dims {
		desc = protowire.AppendTag(desc, 2, protowire.VarintType)
		desc = protowire.AppendVarint(desc, uint64(d))
	}
	return desc
}

// LoDTensors reads a file of LoDTensor records back to back — one record for
// a per-variable file, several for a combined __params__ / .pdiparams file —
// and checks that they consume the file exactly.
func (f *File) LoDTensors() ([]Tensor, error) {
	var ts []Tensor
	for off := int64(0); off < f.size; {
		if len(ts) >= maxRecords {
			return nil, f.errorf(off, "more than %d tensors", maxRecords)
		}
		t, err := f.LoDTensorAt(off)
		if err != nil {
			return nil, err
		}
		ts = append(ts, t)
		off = t.End()
	}
	if len(ts) == 0 {
		return nil, f.errorf(0, "empty file: no tensor")
	}
	return ts, nil
}

// maxRecords bounds the records of one combined file (a real one has tens to
// a few thousand).
const maxRecords = 1 << 16

// LoDTensor reads a per-variable file: exactly one LoDTensor record.
func (f *File) LoDTensor() (Tensor, error) {
	t, err := f.LoDTensorAt(0)
	if err != nil {
		return Tensor{}, err
	}
	if t.End() != f.size {
		return Tensor{}, f.errorf(t.End(), "%d bytes after the tensor's data: not a one-variable LoDTensor file (a combined params file needs the program to name its tensors; a SelectedRows has its own format)", f.size-t.End())
	}
	return t, nil
}

// SelectedRows is a sparse table as Paddle saves it: u32 version (0), u64 row
// count, that many int64 row ids, int64 height, then a tensor of the rows'
// values (first dimension = row count).
type SelectedRows struct {
	// IDs is where the n int64 row ids start; N how many there are.
	IDs, N int64
	Height int64
	Value  Tensor
}

// SelectedRows reads a file holding one SelectedRows, consumed exactly.
func (f *File) SelectedRows() (SelectedRows, error) {
	c := &cursor{f: f}
	if err := c.version0("SelectedRows", ""); err != nil {
		return SelectedRows{}, err
	}
	n, err := c.u64("row count")
	if err != nil {
		return SelectedRows{}, err
	}
	if n > uint64(c.left()/8) {
		return SelectedRows{}, f.errorf(4, "%d rows need %d bytes of ids, the file has %d left", n, n*8, c.left())
	}
	s := SelectedRows{IDs: c.off, N: int64(n)}
	c.off += 8 * int64(n)
	h, err := c.u64("height")
	if err != nil {
		return SelectedRows{}, err
	}
	s.Height = int64(h)
	if s.Value, err = f.TensorAt(c.off); err != nil {
		return SelectedRows{}, err
	}
	if s.Value.Rows() != s.N || len(s.Value.Dims) == 0 {
		return SelectedRows{}, f.errorf(s.Value.Start, "value tensor %v: its first dimension must be the row count %d", s.Value.Dims, s.N)
	}
	if s.Value.End() != f.size {
		return SelectedRows{}, f.errorf(s.Value.End(), "%d bytes after the values", f.size-s.Value.End())
	}
	return s, nil
}

// RowReader streams rows of a tensor's data, and optionally int64 ids from
// another part of the same file, with bounded buffers.
type RowReader struct {
	f        *File
	t        Tensor
	row      []byte
	data     *bufio.Reader
	ids      *bufio.Reader
	i        int64
	idb      [8]byte
	dataNext int64
}

// Rows streams t's rows (t must be a record of f).
func (f *File) Rows(t Tensor) *RowReader {
	return &RowReader{f: f, t: t, row: make([]byte, t.RowBytes()), dataNext: t.Data,
		data: bufio.NewReaderSize(io.NewSectionReader(f.r, t.Data, t.Bytes), 1<<20)}
}

// SelectedRowsRows streams s's rows with their ids.
func (f *File) SelectedRowsRows(s SelectedRows) *RowReader {
	r := f.Rows(s.Value)
	r.ids = bufio.NewReaderSize(io.NewSectionReader(f.r, s.IDs, 8*s.N), 1<<16)
	return r
}

// Next returns the next row's key (its index, or its id for a SelectedRows)
// and bytes, valid until the next call; io.EOF after the last row.
func (r *RowReader) Next() (uint64, []byte, error) {
	if r.i >= r.t.Rows() || len(r.t.Dims) == 0 {
		return 0, nil, io.EOF
	}
	key := uint64(r.i)
	if r.ids != nil {
		if _, err := io.ReadFull(r.ids, r.idb[:]); err != nil {
			return 0, nil, r.f.errorf(0, "row id %d: %v", r.i, err)
		}
		key = binary.LittleEndian.Uint64(r.idb[:])
	}
	if _, err := io.ReadFull(r.data, r.row); err != nil {
		return 0, nil, r.f.errorf(r.dataNext, "row %d: %v", r.i, err)
	}
	r.i++
	r.dataNext += int64(len(r.row))
	return key, r.row, nil
}

// Float32s decodes little-endian float32s.
func Float32s(b []byte) []float32 {
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// Named pairs tensors of a combined params file with their variable names:
// Paddle's save_combine writes the persistables sorted by name, and stores no
// names, so names must be that sorted list (see PersistableNames).
func Named(f *File, ts []Tensor, names []string) (map[string]Tensor, error) {
	if len(ts) != len(names) {
		return nil, fmt.Errorf("%s: %d tensors, but the program has %d persistable variables (%s): is this the program these parameters were saved with?",
			f.Name, len(ts), len(names), abbreviate(names, 6))
	}
	m := make(map[string]Tensor, len(ts))
	for i, t := range ts {
		m[names[i]] = t
	}
	return m, nil
}

func abbreviate(ss []string, n int) string {
	if len(ss) <= n {
		return strings.Join(ss, ", ")
	}
	return strings.Join(ss[:n], ", ") + fmt.Sprintf(", … (%d more)", len(ss)-n)
}
