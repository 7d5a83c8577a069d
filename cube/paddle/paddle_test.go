package paddle

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/elasticctr/terraform-provider-ctr/internal/cubetest"
	"google.golang.org/protobuf/encoding/protowire"
)

func open(t testing.TB, path string) *File {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return NewFile(filepath.Base(path), bytes.NewReader(b), int64(len(b)))
}

func mem(name string, b []byte) *File { return NewFile(name, bytes.NewReader(b), int64(len(b))) }

func floats(t testing.TB, f *File, tn Tensor) []float32 {
	t.Helper()
	b, err := readData(f, tn)
	if err != nil {
		t.Fatal(err)
	}
	return Float32s(b)
}

// near compares with the README's six significant digits.
// readData reads a tensor's data whole.
func readData(f *File, t Tensor) ([]byte, error) {
	b := make([]byte, t.Bytes)
	if _, err := f.r.ReadAt(b, t.Data); err != nil && t.Bytes > 0 {
		return nil, err
	}
	return b, nil
}

func near(a, b float32) bool { return math.Abs(float64(a-b)) <= 1e-5*max(1, math.Abs(float64(b))) }

// The LoDTensors of Paddle's own models decode to the dims and values the
// fixtures' README states.
func TestLoDTensorRealFiles(t *testing.T) {
	for _, c := range []struct {
		file  string
		dims  []int64
		first []float32
	}{
		{"serving-ctr-model/ctr_prediction/fc_3.b_0", []int64{2}, []float32{0.0001, -0.0001}},
		{"serving-ctr-model/ctr_prediction/fc_0.w_0", []int64{273, 400}, []float32{0.078513, -0.0754884}},
		{"serving-ctr-model/ctr_prediction/fc_3.w_0", []int64{400, 2}, nil},
		{"serving-uci-housing/uci_housing_model/fc_0.w_0", []int64{13, 1}, []float32{-1.22346, 2.67443, -2.97781, 4.22473}},
		{"serving-uci-housing/uci_housing_model/fc_0.b_0", []int64{1}, []float32{22.7383}},
		{"edl-mnist-model/mnist_model/conv2d_1.w_0", []int64{50, 20, 5, 5}, nil},
	} {
		t.Run(c.file, func(t *testing.T) {
			f := open(t, cubetest.PaddleData(t, c.file))
			tn, err := f.LoDTensor()
			if err != nil {
				t.Fatal(err)
			}
			if tn.DType != FP32 || !slices.Equal(tn.Dims, c.dims) || tn.LoD != nil {
				t.Fatalf("got %s lod %v, want FP32 %v and no LoD", tn, tn.LoD, c.dims)
			}
			// What a stand-in trainer writes is Paddle's header byte for byte.
			real := cubetest.ReadPaddleData(t, c.file)
			if h := AppendLoDTensorHeader(nil, FP32, c.dims, nil); !bytes.Equal(h, real[:tn.Data]) {
				t.Errorf("AppendLoDTensorHeader = %x, Paddle wrote %x", h, real[:tn.Data])
			}
			vals := floats(t, f, tn)
			for i, want := range c.first {
				if !near(vals[i], want) {
					t.Errorf("value %d = %v, want %v", i, vals[i], want)
				}
			}
			// Streamed rows are the same bytes as the data read whole.
			whole, _ := readData(f, tn)
			var streamed []byte
			rows := f.Rows(tn)
			for i := int64(0); ; i++ {
				k, v, err := rows.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if k != uint64(i) {
					t.Fatalf("row %d has key %d", i, k)
				}
				streamed = append(streamed, v...)
			}
			if !bytes.Equal(streamed, whole) {
				t.Fatal("streamed rows differ from the data")
			}
		})
	}
}

// A combined .pdiparams holds its program's persistables sorted by name.
func TestCombinedParamsNamedByTheirProgram(t *testing.T) {
	prog := cubetest.ReadPaddleData(t, "paddle-lite-simple-model/model.pdmodel")
	vars, err := ProgramVars(prog)
	if err != nil {
		t.Fatal(err)
	}
	names := PersistableNames(vars)
	want := []string{"conv1_bn_mean", "conv1_bn_offset", "conv1_bn_scale", "conv1_bn_variance", "conv1_weights"}
	if !slices.Equal(names, want) {
		t.Fatalf("persistables %v, want %v", names, want)
	}
	f := open(t, cubetest.PaddleData(t, "paddle-lite-simple-model/model.pdiparams"))
	ts, err := f.LoDTensors()
	if err != nil {
		t.Fatal(err)
	}
	byName, err := Named(f, ts, names)
	if err != nil {
		t.Fatal(err)
	}
	if d := byName["conv1_weights"].Dims; !slices.Equal(d, []int64{32, 3, 3, 3}) {
		t.Errorf("conv1_weights dims %v, want [32 3 3 3]", d)
	}
	if d := byName["conv1_bn_mean"].Dims; !slices.Equal(d, []int64{32}) {
		t.Errorf("conv1_bn_mean dims %v, want [32]", d)
	}
	if _, err := Named(f, ts, names[1:]); err == nil || !strings.Contains(err.Error(), "5 tensors, but the program has 4") {
		t.Errorf("a program with another var count: %v", err)
	}
	// A combined file is not a one-variable file.
	if _, err := f.LoDTensor(); err == nil || !strings.Contains(err.Error(), "combined params file") {
		t.Errorf("LoDTensor on a combined file: %v", err)
	}
}

// Fluid's CTR __model__ lists its 8 fc parameters as persistables, not its
// feed and fetch variables.
func TestProgramVarsOfTheServingCTRModel(t *testing.T) {
	b := cubetest.ReadPaddleData(t, "serving-ctr-model/ctr_prediction/__model__")
	vars, err := ProgramVars(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(vars) != 129 {
		t.Errorf("%d vars, want 129", len(vars))
	}
	want := []string{"fc_0.b_0", "fc_0.w_0", "fc_1.b_0", "fc_1.w_0", "fc_2.b_0", "fc_2.w_0", "fc_3.b_0", "fc_3.w_0"}
	if got := PersistableNames(vars); !slices.Equal(got, want) {
		t.Fatalf("persistables %v, want %v", got, want)
	}
}

// PaddleRec's saved embedding is a SelectedRows: feasign ids, then [3949, 9].
func TestSelectedRowsRealFile(t *testing.T) {
	f := open(t, cubetest.PaddleData(t, "paddlerec-cube/embedding.selectedrows"))
	s, err := f.SelectedRows()
	if err != nil {
		t.Fatal(err)
	}
	if s.N != 3949 || s.Height != 3949 || !slices.Equal(s.Value.Dims, []int64{3949, 9}) || s.Value.DType != FP32 {
		t.Fatalf("got %d rows, height %d, value %s", s.N, s.Height, s.Value)
	}
	rows := f.SelectedRowsRows(s)
	var keys []uint64
	for {
		k, v, err := rows.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(v) != 36 {
			t.Fatalf("row of %d bytes, want 36", len(v))
		}
		keys = append(keys, k)
	}
	if len(keys) != 3949 || keys[0] != 0 || keys[1] != 1905912492 || keys[2] != 3052599814 {
		t.Fatalf("%d keys, first %v", len(keys), keys[:min(3, len(keys))])
	}
	// Read as a LoDTensor it is refused, not mistaken for one.
	if _, err := f.LoDTensor(); err == nil {
		t.Error("a SelectedRows read as a LoDTensor was accepted")
	}
}

// encodeLoDTensor is a record with its data; packed writes dims packed
// (Paddle writes them unpacked; the reader takes both).
func encodeLoDTensor(dt DType, dims []int64, lod [][]uint64, data []byte, packed bool) []byte {
	if !packed {
		return append(AppendLoDTensorHeader(nil, dt, dims, lod), data...)
	}
	b := AppendLoDTensorHeader(nil, dt, nil, lod)
	b = b[:len(b)-len(tensorDesc(dt, nil))-4]
	desc := tensorDesc(dt, nil)
	var p []byte
	for _, d := range dims {
		p = protowire.AppendVarint(p, uint64(d))
	}
	desc = protowire.AppendTag(desc, 2, protowire.BytesType)
	desc = protowire.AppendBytes(desc, p)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(desc)))
	return append(append(b, desc...), data...)
}

func TestLoDTensorLoDAndPackedDims(t *testing.T) {
	data := make([]byte, 6*4)
	for _, packed := range []bool{false, true} {
		b := encodeLoDTensor(FP32, []int64{3, 2}, [][]uint64{{0, 1, 3}}, data, packed)
		tn, err := mem("x", b).LoDTensor()
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(tn.Dims, []int64{3, 2}) || len(tn.LoD) != 1 || !slices.Equal(tn.LoD[0], []uint64{0, 1, 3}) || tn.RowBytes() != 8 {
			t.Fatalf("packed=%v: got %s lod %v rowbytes %d", packed, tn, tn.LoD, tn.RowBytes())
		}
	}
}

// Every way a header can lie is refused with the file and offset, and every
// truncation of a real file is refused.
func TestLoDTensorRefusesBadHeaders(t *testing.T) {
	good := encodeLoDTensor(FP32, []int64{2, 2}, nil, make([]byte, 16), false)
	for _, c := range []struct {
		name string
		b    []byte
		want string
	}{
		{"version", append([]byte{1}, good[1:]...), "LoDTensor version 1"},
		{"lod levels", func() []byte { b := slices.Clone(good); b[4] = 200; return b }(), "LoD levels"},
		{"negative dim", encodeLoDTensor(FP32, []int64{-1, 2}, nil, nil, false), "dims"},
		{"overflowing dims", encodeLoDTensor(FP32, []int64{1 << 40, 1 << 40}, nil, nil, false), "fits in 63 bits"},
		{"data past the end", encodeLoDTensor(FP32, []int64{1000, 1000}, nil, make([]byte, 16), false), "truncated"},
		{"bad type", encodeLoDTensor(DType(9), []int64{2}, nil, make([]byte, 16), false), "not a tensor element type"},
		{"trailing bytes", append(slices.Clone(good), 0), "bytes after"},
		{"empty", nil, "LoDTensor version"},
		{"too many dims", encodeLoDTensor(FP32, make([]int64, 20), nil, nil, false), "more than 16 dims"},
	} {
		_, err := mem("bad", c.b).LoDTensor()
		var fe *FormatError
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.As(err, &fe) {
			t.Errorf("%s: got %v, want a FormatError containing %q", c.name, err, c.want)
		}
	}
	real := cubetest.ReadPaddleData(t, "serving-ctr-model/ctr_prediction/fc_3.w_0")
	for n := range len(real) {
		if _, err := mem("cut", real[:n]).LoDTensor(); err == nil {
			t.Fatalf("the first %d of %d bytes were accepted", n, len(real))
		}
	}
}

func TestCommonSparseTableText(t *testing.T) {
	meta, err := ParseCommonMeta([]byte("param=emb\nshard_id=0\nrow_names=Param,Moment1,Moment2,Beta1Pow,Beta2Pow,LearningRate\nrow_dims=3,3,3,1,1,1\ncount=2\n"))
	if err != nil {
		t.Fatal(err)
	}
	in := "7\t1\t0\t1\t0.5,1.5,-2,9,9,9,9,9,9,1,1,1,\n" +
		"\n" +
		"18446744073709551615\t0\t0\t1\t1,2,3,0,0,0,0,0,0,0,0,0,\n"
	r := NewCommonRows("emb.block0.txt", strings.NewReader(in), meta)
	k, v, err := r.Next()
	if err != nil || k != 7 || !slices.Equal(Float32s(v), []float32{0.5, 1.5, -2}) {
		t.Fatalf("first row: %d %v %v", k, Float32s(v), err)
	}
	k, v, err = r.Next()
	if err != nil || k != math.MaxUint64 || !slices.Equal(Float32s(v), []float32{1, 2, 3}) {
		t.Fatalf("second row: %d %v %v", k, Float32s(v), err)
	}
	if _, _, err := r.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the last row: %v", err)
	}
	// The one-column-per-name layout, Param not first.
	meta2, _ := ParseCommonMeta([]byte("row_names=Moment,Param\nrow_dims=2,2\n"))
	r = NewCommonRows("t", strings.NewReader("3\t9,9\t4,5\t\n"), meta2)
	if k, v, err := r.Next(); err != nil || k != 3 || !slices.Equal(Float32s(v), []float32{4, 5}) {
		t.Fatalf("column layout: %d %v %v", k, Float32s(v), err)
	}
	for _, bad := range []string{"x\t1\t0\t1\t1,2,3,4,5,6,7,8,9,1,1,1,\n", "1\t1\t0\t1\t1,2,\n", "1\t1\t0\t1\t1,2,3,4,5,6,7,8,9,1,1,nan?,\n", "1\t2\n"} {
		r := NewCommonRows("bad.block0.txt", strings.NewReader(bad), meta)
		if _, _, err := r.Next(); err == nil || !strings.Contains(err.Error(), "bad.block0.txt: line 1") {
			t.Errorf("%q: %v", bad, err)
		}
	}
	for _, bad := range []string{"row_names=a,b\nrow_dims=1\n", "row_dims=0\nrow_names=a\n", "junk\n", ""} {
		if _, err := ParseCommonMeta([]byte(bad)); err == nil {
			t.Errorf("meta %q accepted", bad)
		}
	}
}

func TestMemorySparseTableText(t *testing.T) {
	l := CtrLayout{EmbedxDim: 3, EmbedSGDDim: 1, EmbedxSGDDim: 1}
	// slot unseen delta show click embed_w g2sum [embedx_w ×3 embedx_g2sum]
	in := "11 2 0 0.5 10 1 0.25 0.1\n" +
		"12 2 0 0.5 10 1 0.75 0.1 1 2 3 0.2\n"
	r := NewMemoryRows("part-000-00000", strings.NewReader(in), l)
	if k, v, err := r.Next(); err != nil || k != 11 || !slices.Equal(Float32s(v), []float32{0.25, 0, 0, 0}) {
		t.Fatalf("no embedx: %d %v %v", k, Float32s(v), err)
	}
	if k, v, err := r.Next(); err != nil || k != 12 || !slices.Equal(Float32s(v), []float32{0.75, 1, 2, 3}) {
		t.Fatalf("with embedx: %d %v %v", k, Float32s(v), err)
	}
	l.Pull = true
	r = NewMemoryRows("p", strings.NewReader(in), l)
	if _, v, err := r.Next(); err != nil || !slices.Equal(Float32s(v), []float32{10, 1, 0.25, 0, 0, 0}) {
		t.Fatalf("pull layout: %v %v", Float32s(v), err)
	}
	r = NewMemoryRows("part-001-00002", strings.NewReader("5 1 2 3\n"), l)
	if _, _, err := r.Next(); err == nil || !strings.Contains(err.Error(), "part-001-00002: line 1: 3 values") {
		t.Errorf("short line: %v", err)
	}
	r = NewMemoryRows("p", strings.NewReader(strings.Repeat("1", MaxLineBytes+1)), l)
	if _, _, err := r.Next(); err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Errorf("an endless line: %v", err)
	}
}

func TestTableShards(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"emb.block1.txt", "emb.block0.txt", "emb.block0.meta", "README"} {
		os.WriteFile(filepath.Join(dir, n), nil, 0o644)
	}
	kind, files, err := TableShards(dir)
	if err != nil || kind != "common" || len(files) != 2 || filepath.Base(files[0]) != "emb.block0.txt" {
		t.Fatalf("%s %v %v", kind, files, err)
	}
	if CommonMetaPath(files[0]) != filepath.Join(dir, "emb.block0.meta") {
		t.Errorf("meta path %s", CommonMetaPath(files[0]))
	}
	os.WriteFile(filepath.Join(dir, "part-000-00000.gz"), nil, 0o644)
	if _, _, err := TableShards(dir); err == nil {
		t.Error("a folder with both layouts was accepted")
	}
	if _, _, err := TableShards(t.TempDir()); err == nil {
		t.Error("an empty folder was accepted")
	}
}
