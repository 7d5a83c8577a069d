package paddle

import (
	"bytes"
	"errors"
	"io"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/elasticctr/terraform-provider-ctr/internal/cubetest"
)

// seed adds a real fixture to a fuzz corpus where ../shared is present.
func seed(f *testing.F, rel string) {
	f.Helper()
	if p, err := cubetest.FindPaddleData(rel); err == nil {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
}

// drain reads every row, checking that rows cover the data exactly.
func drain(t *testing.T, r *RowReader, tn Tensor) {
	var n int64
	for {
		_, v, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("a tensor that decoded fails to stream: %v", err)
		}
		n += int64(len(v))
	}
	if len(tn.Dims) > 0 && n != tn.Bytes {
		t.Fatalf("streamed %d bytes of %d", n, tn.Bytes)
	}
}

func FuzzLoDTensors(f *testing.F) {
	seed(f, "serving-ctr-model/ctr_prediction/fc_3.b_0")
	seed(f, "paddle-lite-simple-model/model.pdiparams")
	seed(f, "serving-uci-housing/uci_housing_model/fc_0.w_0")
	f.Add(encodeLoDTensor(FP32, []int64{2, 1}, [][]uint64{{0, 2}}, make([]byte, 8), true))
	f.Fuzz(func(t *testing.T, b []byte) {
		file := mem("fuzz", b)
		ts, err := file.LoDTensors()
		if err != nil {
			return
		}
		end := int64(0)
		for _, tn := range ts {
			if tn.Start != end || tn.End() > int64(len(b)) || tn.Bytes < 0 {
				t.Fatalf("tensor %s at %d..%d in a file of %d (previous end %d)", tn, tn.Start, tn.End(), len(b), end)
			}
			end = tn.End()
			if tn.Bytes <= 1<<20 {
				drain(t, file.Rows(tn), tn)
			}
		}
		if end != int64(len(b)) {
			t.Fatalf("tensors end at %d, file at %d", end, len(b))
		}
	})
}

func FuzzSelectedRows(f *testing.F) {
	seed(f, "paddlerec-cube/embedding.selectedrows")
	f.Fuzz(func(t *testing.T, b []byte) {
		file := mem("fuzz", b)
		s, err := file.SelectedRows()
		if err != nil {
			return
		}
		if s.IDs+8*s.N > int64(len(b)) || s.Value.End() != int64(len(b)) || s.Value.Rows() != s.N {
			t.Fatalf("selected rows %+v outside a file of %d", s, len(b))
		}
		if s.Value.Bytes <= 1<<20 {
			drain(t, file.SelectedRowsRows(s), s.Value)
		}
	})
}

func FuzzProgramVars(f *testing.F) {
	seed(f, "paddle-lite-simple-model/model.pdmodel")
	seed(f, "serving-uci-housing/uci_housing_model/__model__")
	f.Fuzz(func(t *testing.T, b []byte) {
		vars, err := ProgramVars(b)
		if err != nil {
			return
		}
		names := PersistableNames(vars)
		if len(names) > len(vars) {
			t.Fatalf("%d names from %d vars", len(names), len(vars))
		}
	})
}

func FuzzParseProgram(f *testing.F) {
	seed(f, "serving-ctr-model/ctr_prediction/__model__")
	seed(f, "serving-uci-housing/uci_housing_model/__model__")
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParseProgram(b)
		vars, verr := ProgramVars(b)
		if (err == nil) != (verr == nil) {
			t.Fatalf("ParseProgram: %v, but ProgramVars: %v", err, verr)
		}
		if err != nil {
			return
		}
		n := 0
		for _, bl := range p.Blocks {
			for _, v := range bl.Vars {
				if v.Name != vars[n].Name || !slices.Equal(v.Dims, vars[n].Dims) {
					t.Fatalf("var %d: %+v in the program, %+v from ProgramVars", n, v, vars[n])
				}
				n++
				if len(v.Dims) > MaxDims || slices.ContainsFunc(v.Dims, func(d int64) bool { return d < -1 }) || v.LoDLevel < 0 || v.LoDLevel > MaxLoDLevels {
					t.Fatalf("var %q decoded with dims %v and lod_level %d", v.Name, v.Dims, v.LoDLevel)
				}
			}
			if len(bl.Vars)+len(bl.Ops) > MaxProgramItems {
				t.Fatalf("%d vars and %d ops", len(bl.Vars), len(bl.Ops))
			}
		}
		if n != len(vars) {
			t.Fatalf("%d vars in the blocks, %d from ProgramVars", n, len(vars))
		}
	})
}

func FuzzSparseTableText(f *testing.F) {
	f.Add([]byte("7\t1\t0\t1\t0.5,1.5,-2,9,9,9,\n"), []byte("row_names=Param,Moment\nrow_dims=3,3\n"))
	f.Add([]byte("11 2 0 0.5 10 1 0.25 0.1 1 2 3 0.2\n"), []byte(""))
	f.Fuzz(func(t *testing.T, text, meta []byte) {
		if m, err := ParseCommonMeta(meta); err == nil {
			off, dim, total := m.param()
			r := NewCommonRows("fuzz", bytes.NewReader(text), m)
			for {
				_, v, err := r.Next()
				if err != nil {
					break
				}
				if len(v) != 4*dim || off+dim > total {
					t.Fatalf("a row of %d bytes for Param width %d", len(v), dim)
				}
			}
		}
		l := CtrLayout{EmbedxDim: 3, EmbedSGDDim: 1, EmbedxSGDDim: 1}
		r := NewMemoryRows("fuzz", strings.NewReader(string(text)), l)
		for {
			_, v, err := r.Next()
			if err != nil {
				break
			}
			if len(v) != 4*l.Width() {
				t.Fatalf("a row of %d bytes, want %d", len(v), 4*l.Width())
			}
		}
	})
}
