package infer

import (
	"bytes"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/elasticctr/terraform-provider-ctr/cube/paddle"
	"github.com/elasticctr/terraform-provider-ctr/internal/cubetest"
)

const (
	ctrModel = "serving-ctr-model/ctr_prediction"
	uciModel = "serving-uci-housing/uci_housing_model"
)

func load(t testing.TB, rel string) *Model {
	t.Helper()
	m, err := Load(cubetest.PaddleData(t, rel))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// The CTR model is fed 26 embedding sequences then dense_input (their feed
// ops' col order), and fetches its scaled softmax.
func TestLoadServingCTRModel(t *testing.T) {
	m := load(t, ctrModel)
	var want []Feed
	for i := range 26 {
		want = append(want, Feed{Name: fmt.Sprintf("embedding_%d.tmp_0", i), Dims: []int64{-1, 10}, LoDLevel: 1})
	}
	want = append(want, Feed{Name: "dense_input", Dims: []int64{-1, 13}})
	if got := m.Feeds(); !slices.EqualFunc(got, want, func(a, b Feed) bool {
		return a.Name == b.Name && slices.Equal(a.Dims, b.Dims) && a.LoDLevel == b.LoDLevel
	}) {
		t.Errorf("feeds %v, want %v", got, want)
	}
	if got := m.Fetches(); !slices.Equal(got, []string{"save_infer_model/scale_0"}) {
		t.Errorf("fetches %v, want [save_infer_model/scale_0]", got)
	}
	// What Feeds returns is a copy.
	m.Feeds()[0].Dims[0] = 7
	if m.Feeds()[0].Dims[0] != -1 {
		t.Error("Feeds hands out the model's own dims")
	}
}

// The shapes the interpreter infers at load are the ones Paddle's own
// compile-time inference wrote into the program, for every op's output.
func TestShapesAtLoadAreThePrograms(t *testing.T) {
	for _, rel := range []string{ctrModel, uciModel} {
		t.Run(rel, func(t *testing.T) {
			dir := cubetest.PaddleData(t, rel)
			b, err := os.ReadFile(filepath.Join(dir, "__model__"))
			if err != nil {
				t.Fatal(err)
			}
			prog, err := paddle.ParseProgram(b)
			if err != nil {
				t.Fatal(err)
			}
			block := prog.Blocks[0]
			params, err := loadParams(dir, block.Vars)
			if err != nil {
				t.Fatal(err)
			}
			m, shapes, err := compile(block, params)
			if err != nil {
				t.Fatal(err)
			}
			declared := map[string]paddle.Var{}
			for _, v := range block.Vars {
				declared[v.Name] = v
			}
			for _, st := range m.steps {
				v, got := declared[st.out], shapes[st.out]
				if !slices.Equal(got.dims, v.Dims) || got.lod != (v.LoDLevel > 0) {
					t.Errorf("op %d (%s) writes %s: inferred %v lod %t, the program declares %v lod_level %d", st.index, st.typ, st.out, got.dims, got.lod, v.Dims, v.LoDLevel)
				}
			}
		})
	}
}

// sample is one CTR request: 26 slots of 10-wide embedding rows (any
// number, none included) and 13 dense values.
type sample struct {
	slots [26][][]float32
	dense []float32
}

func samples(seed uint64, n int) []sample {
	r := rand.New(rand.NewPCG(seed, 0))
	out := make([]sample, n)
	for i := range out {
		for s := range out[i].slots {
			for range (s + 2*i) % 4 { // slot 0 of sample 0 is empty
				row := make([]float32, 10)
				for j := range row {
					row[j] = r.Float32()*2 - 1
				}
				out[i].slots[s] = append(out[i].slots[s], row)
			}
		}
		for range 13 {
			out[i].dense = append(out[i].dense, r.Float32()*4)
		}
	}
	return out
}

// inputs lays samples out as the model's feeds: each slot one LoD tensor.
func inputs(ss []sample) map[string]Input {
	in := map[string]Input{}
	for s := range 26 {
		v := Input{LoD: []int64{0}}
		for _, x := range ss {
			for _, row := range x.slots[s] {
				v.Data = append(v.Data, row...)
			}
			v.LoD = append(v.LoD, v.LoD[len(v.LoD)-1]+int64(len(x.slots[s])))
		}
		v.Dims = []int64{v.LoD[len(v.LoD)-1], 10}
		in[fmt.Sprintf("embedding_%d.tmp_0", s)] = v
	}
	dense := Input{Dims: []int64{int64(len(ss)), 13}}
	for _, x := range ss {
		dense.Data = append(dense.Data, x.dense...)
	}
	in["dense_input"] = dense
	return in
}

// readTensor reads a parameter file with cube/paddle, apart from Load.
func readTensor(t testing.TB, path string) ([]float32, []int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tn, err := paddle.NewFile(path, bytes.NewReader(b), int64(len(b))).LoDTensor()
	if err != nil {
		t.Fatal(err)
	}
	return paddle.Float32s(b[tn.Data:tn.End()]), tn.Dims
}

// forward is the CTR network written out by hand, in float64, from the
// program's text dump: average-pool each slot (an empty one gives zeros),
// concat [emb0..emb25, dense], three fc+relu, an fc, softmax, scale 1.
func forward(t testing.TB, dir string, x sample) []float64 {
	in := make([]float64, 0, 273)
	for _, rows := range x.slots {
		pooled := make([]float64, 10)
		for _, row := range rows {
			for j, v := range row {
				pooled[j] += float64(v) / float64(len(rows))
			}
		}
		in = append(in, pooled...)
	}
	for _, v := range x.dense {
		in = append(in, float64(v))
	}
	for l := range 4 {
		w, wd := readTensor(t, filepath.Join(dir, fmt.Sprintf("fc_%d.w_0", l)))
		b, _ := readTensor(t, filepath.Join(dir, fmt.Sprintf("fc_%d.b_0", l)))
		if int64(len(in)) != wd[0] {
			t.Fatalf("fc_%d: %d inputs for a weight %v", l, len(in), wd)
		}
		out := make([]float64, wd[1])
		for j := range out {
			out[j] = float64(b[j])
			for k, v := range in {
				out[j] += v * float64(w[int64(k)*wd[1]+int64(j)])
			}
			if l < 3 {
				out[j] = max(out[j], 0)
			}
		}
		in = out
	}
	top := slices.Max(in)
	var sum float64
	for j := range in {
		in[j] = math.Exp(in[j] - top)
		sum += in[j]
	}
	for j := range in {
		in[j] /= sum
	}
	return in
}

// The interpreter's click probabilities are the hand-written network's.
func TestRunCTRAgainstAHandWrittenForwardPass(t *testing.T) {
	dir := cubetest.PaddleData(t, ctrModel)
	m := load(t, ctrModel)
	const seed = 20240206
	ss := samples(seed, 3)
	out, err := m.Run(inputs(ss))
	if err != nil {
		t.Fatal(err)
	}
	prob := out["save_infer_model/scale_0"]
	if !slices.Equal(prob.Dims, []int64{3, 2}) || len(prob.Data) != 6 {
		t.Fatalf("output dims %v with %d values, want [3 2]", prob.Dims, len(prob.Data))
	}
	t.Logf("seed %d: click probabilities %v", seed, prob.Data)
	for i, x := range ss {
		want := forward(t, dir, x)
		got := prob.Data[2*i : 2*i+2]
		for j := range want {
			if math.Abs(float64(got[j])-want[j]) > 1e-5 {
				t.Errorf("seed %d sample %d: probabilities %v, the hand-written pass gives %v", seed, i, got, want)
			}
		}
		if s := float64(got[0]) + float64(got[1]); math.Abs(s-1) > 1e-6 {
			t.Errorf("sample %d: probabilities %v sum to %v", i, got, s)
		}
	}
	if prob.Data[1] == prob.Data[3] || prob.Data[3] == prob.Data[5] {
		t.Errorf("samples unlike each other got the same probability: %v", prob.Data)
	}
}

// The UCI housing model is x·w + b.
func TestRunUCIHousing(t *testing.T) {
	dir := cubetest.PaddleData(t, uciModel)
	m := load(t, uciModel)
	w, _ := readTensor(t, filepath.Join(dir, "fc_0.w_0"))
	b, _ := readTensor(t, filepath.Join(dir, "fc_0.b_0"))
	r := rand.New(rand.NewPCG(7, 0))
	x := make([]float32, 4*13)
	for i := range x {
		x[i] = r.Float32() - 0.5
	}
	out, err := m.Run(map[string]Input{"x": {Data: x, Dims: []int64{4, 13}}})
	if err != nil {
		t.Fatal(err)
	}
	price := out["fc_0.tmp_1"]
	if !slices.Equal(price.Dims, []int64{4, 1}) {
		t.Fatalf("dims %v, want [4 1]", price.Dims)
	}
	for i := range 4 {
		want := float64(b[0])
		for k := range 13 {
			want += float64(x[13*i+k]) * float64(w[k])
		}
		if math.Abs(float64(price.Data[i])-want) > 1e-4 {
			t.Errorf("row %d: %v, want %v", i, price.Data[i], want)
		}
	}
}

// Runs at once from several goroutines give each its own answer (go test
// -race checks that they share nothing mutable).
func TestRunConcurrently(t *testing.T) {
	m := load(t, ctrModel)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			in := inputs(samples(uint64(g), 2))
			want, err := m.Run(in)
			if err != nil {
				t.Error(err)
				return
			}
			for range 20 {
				got, err := m.Run(in)
				if err != nil || !slices.Equal(got["save_infer_model/scale_0"].Data, want["save_infer_model/scale_0"].Data) {
					t.Errorf("goroutine %d: %v, %v; first run gave %v", g, got, err, want)
					return
				}
			}
		})
	}
	wg.Wait()
}

// copyModel copies a fixture model into a temporary folder, then lets edit
// break it.
func copyModel(t *testing.T, rel string, edit func(dir string)) string {
	t.Helper()
	src := cubetest.PaddleData(t, rel)
	dir := t.TempDir()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	edit(dir)
	return dir
}

func rewrite(t *testing.T, path string, f func([]byte) []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, f(b), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestLoadRefuses(t *testing.T) {
	for _, c := range []struct {
		name, want string
		edit       func(t *testing.T, dir string)
	}{
		{"an op it does not run", `op 65 is "softmix", which this interpreter does not run`, func(t *testing.T, dir string) {
			rewrite(t, filepath.Join(dir, "__model__"), func(b []byte) []byte {
				// OpDesc.type (field 3) = "softmax", once in the program.
				old := []byte("\x1a\x07softmax")
				if n := bytes.Count(b, old); n != 1 {
					t.Fatalf("the program holds the softmax op's type %d times", n)
				}
				return bytes.Replace(b, old, []byte("\x1a\x07softmix"), 1)
			})
		}},
		{"a missing weight file", `fc_2.w_0" is missing`, func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, "fc_2.w_0"))
		}},
		{"a truncated weight file", "truncated file", func(t *testing.T, dir string) {
			rewrite(t, filepath.Join(dir, "fc_1.w_0"), func(b []byte) []byte { return b[:len(b)-4] })
		}},
		{"a float64 weight", "FP64 [2]: this interpreter computes in float32", func(t *testing.T, dir string) {
			rewrite(t, filepath.Join(dir, "fc_3.b_0"), func([]byte) []byte {
				return append(paddle.AppendLoDTensorHeader(nil, paddle.FP64, []int64{2}, nil), make([]byte, 16)...)
			})
		}},
		{"a weight of other dims", "holds FP32 [400 3], but the program declares [400 2]", func(t *testing.T, dir string) {
			rewrite(t, filepath.Join(dir, "fc_3.w_0"), func([]byte) []byte {
				return append(paddle.AppendLoDTensorHeader(nil, paddle.FP32, []int64{400, 3}, nil), make([]byte, 4*400*3)...)
			})
		}},
		{"combined parameters", "combined parameters are not supported by this interpreter", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, "__params__"), nil, 0o644)
		}},
		{"no program", `__model__" is missing`, func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, "__model__"))
		}},
		{"a broken program", "ProgramDesc", func(t *testing.T, dir string) {
			rewrite(t, filepath.Join(dir, "__model__"), func(b []byte) []byte { return b[:len(b)/2] })
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := copyModel(t, ctrModel, func(dir string) { c.edit(t, dir) })
			_, err := Load(dir)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
}

func TestRunRefuses(t *testing.T) {
	m := load(t, ctrModel)
	want, err := m.Run(inputs(samples(1, 3)))
	if err != nil {
		t.Fatalf("the unbroken request: %v", err)
	}
	// A LoD on the dense feed is carried, as Paddle's feed op does, and
	// changes nothing.
	in := inputs(samples(1, 3))
	d := in["dense_input"]
	d.LoD = []int64{0, 1, 3}
	in["dense_input"] = d
	if got, err := m.Run(in); err != nil || !slices.Equal(got["save_infer_model/scale_0"].Data, want["save_infer_model/scale_0"].Data) {
		t.Errorf("with a LoD on dense_input: %v, %v; without: %v", got, err, want)
	}
	for _, c := range []struct {
		name, want string
		edit       func(in map[string]Input)
	}{
		{"a missing feed", `feed "dense_input" is missing`, func(in map[string]Input) { delete(in, "dense_input") }},
		{"an input that is no feed", `"C1" is not a feed of the model`, func(in map[string]Input) { in["C1"] = Input{} }},
		{"a dense input of the wrong width", "feed \"dense_input\": dims [3 12], the model declares [-1 13]", func(in map[string]Input) {
			in["dense_input"] = Input{Data: make([]float32, 36), Dims: []int64{3, 12}}
		}},
		{"too few values for the dims", "38 values for dims [3 13], which hold 39", func(in map[string]Input) {
			in["dense_input"] = Input{Data: make([]float32, 38), Dims: []int64{3, 13}}
		}},
		{"a rank other than declared", "dims [39], want 2 dims", func(in map[string]Input) {
			in["dense_input"] = Input{Data: make([]float32, 39), Dims: []int64{39}}
		}},
		{"dims too large to hold", "more than", func(in map[string]Input) {
			in["dense_input"] = Input{Dims: []int64{1 << 60, 13}}
		}},
		{"a LoD not from 0", "must start at 0", func(in map[string]Input) { setLoD(in, 1, 2, 3, 4) }},
		{"a decreasing LoD", "offset 2 is below the one before it", func(in map[string]Input) { setLoD(in, 0, 3, 2, 4) }},
		{"a LoD short of the rows", "must end at the row count 4", func(in map[string]Input) { setLoD(in, 0, 1, 2, 3) }},
		{"no LoD for a sequence feed", `feed "embedding_0.tmp_0" (lod_level 1): no LoD`, func(in map[string]Input) { setLoD(in) }},
		{"a bad LoD for the dense feed", `feed "dense_input" (lod_level 0): LoD [0 2]: the offsets must end at the row count 3`, func(in map[string]Input) {
			d := in["dense_input"]
			d.LoD = []int64{0, 2}
			in["dense_input"] = d
		}},
		{"sequences unlike the batch", "op 53 (concat): input 1 has dims [3 10], input 0 [4 10]: they differ outside axis 1", func(in map[string]Input) {
			setLoD(in, 0, 1, 2, 3, 4)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := inputs(samples(1, 3))
			c.edit(in)
			_, err := m.Run(in)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
}

// setLoD gives embedding_0 four rows and the LoD offsets given.
func setLoD(in map[string]Input, lod ...int64) {
	in["embedding_0.tmp_0"] = Input{Data: make([]float32, 40), Dims: []int64{4, 10}, LoD: lod}
}

// Each pool type over sequences of 2, 0 and 1 rows of width 2.
func TestSequencePoolTypes(t *testing.T) {
	x := &value{data: []float32{1, -4, 3, 2, 5, 6}, dims: []int64{3, 2}, lod: []int64{0, 2, 2, 3}}
	for pool, want := range map[string][]float32{
		"SUM":     {4, -2, 9, 9, 5, 6},
		"AVERAGE": {2, -1, 9, 9, 5, 6},
		"SQRT":    {4 / math.Sqrt2, -2 / math.Sqrt2, 9, 9, 5, 6},
		"MAX":     {3, 2, 9, 9, 5, 6},
		"FIRST":   {1, -4, 9, 9, 5, 6},
		"LAST":    {3, 2, 9, 9, 5, 6},
	} {
		k := sequencePool{pool: pool, pad: 9}
		out := runKernel(t, k, x)
		if !slices.Equal(out.dims, []int64{3, 2}) || !near(out.data, want) {
			t.Errorf("%s: %v %v, want [3 2] %v", pool, out.dims, out.data, want)
		}
	}
}

// elementwise_add broadcasts Y over X as Paddle 1.x: equal dims, Y aligned
// at axis, at the end (-1), and with trailing 1s trimmed.
func TestElementwiseAddBroadcast(t *testing.T) {
	x := &value{dims: []int64{2, 3, 2}}
	for i := range 12 {
		x.data = append(x.data, float32(100*i))
	}
	for _, c := range []struct {
		axis  int
		ydims []int64
		y     []float32
		at    func(i, j, k int) int // which y adds to x[i, j, k]
	}{
		{-1, []int64{2, 3, 2}, seq(12), func(i, j, k int) int { return 6*i + 2*j + k }},
		{1, []int64{3}, seq(3), func(_, j, _ int) int { return j }},
		{1, []int64{3, 1}, seq(3), func(_, j, _ int) int { return j }},
		{-1, []int64{2}, seq(2), func(_, _, k int) int { return k }},
		{0, []int64{2, 3}, seq(6), func(i, j, _ int) int { return 3*i + j }},
		{-1, []int64{1}, seq(1), func(_, _, _ int) int { return 0 }},
	} {
		y := &value{data: c.y, dims: c.ydims}
		out := runKernel(t, elementwiseAdd{c.axis}, x, y)
		for i := range 2 {
			for j := range 3 {
				for k := range 2 {
					at := 6*i + 2*j + k
					if want := x.data[at] + c.y[c.at(i, j, k)]; out.data[at] != want {
						t.Errorf("axis %d Y %v: out[%d %d %d] = %v, want %v", c.axis, c.ydims, i, j, k, out.data[at], want)
					}
				}
			}
		}
	}
}

// concat along axis 0 and 1; mul of a 3-D X with x_num_col_dims 2.
func TestConcatAndMul(t *testing.T) {
	a := &value{data: seq(4), dims: []int64{2, 2}}
	b := &value{data: []float32{10, 11}, dims: []int64{2, 1}}
	if out := runKernel(t, concat{1}, a, b); !slices.Equal(out.dims, []int64{2, 3}) || !slices.Equal(out.data, []float32{1, 2, 10, 3, 4, 11}) {
		t.Errorf("concat axis 1: %v %v", out.dims, out.data)
	}
	if out := runKernel(t, concat{-2}, a, a); !slices.Equal(out.dims, []int64{4, 2}) || !slices.Equal(out.data, []float32{1, 2, 3, 4, 1, 2, 3, 4}) {
		t.Errorf("concat axis -2: %v %v", out.dims, out.data)
	}
	x := &value{data: seq(12), dims: []int64{2, 3, 2}}
	w := &value{data: []float32{1, 0, -1, 2, 1, 0}, dims: []int64{2, 3}}
	out := runKernel(t, mul{2, 1}, x, w)
	if !slices.Equal(out.dims, []int64{2, 3, 3}) {
		t.Fatalf("mul dims %v, want [2 3 3]", out.dims)
	}
	for r := range 6 {
		for j := range 3 {
			want := x.data[2*r]*w.data[j] + x.data[2*r+1]*w.data[3+j]
			if got := out.data[3*r+j]; got != want {
				t.Errorf("mul out[%d, %d] = %v, want %v", r, j, got, want)
			}
		}
	}
}

// Each kernel refuses inputs it cannot compute, at load (with -1) as in Run.
func TestKernelsRefuseShapes(t *testing.T) {
	for _, c := range []struct {
		name string
		k    kernel
		in   []shape
		want string
	}{
		{"mul of a weight that does not fit", mul{1, 1}, []shape{{dims: []int64{-1, 273}}, {dims: []int64{272, 400}}}, "input X [-1 273] flattens to 273 columns, input Y [272 400] to 272 rows"},
		{"mul of a 1-D X", mul{1, 1}, []shape{{dims: []int64{273}}, {dims: []int64{273, 400}}}, "below its input's rank"},
		{"concat of other widths on axis 0", concat{0}, []shape{{dims: []int64{-1, 10}}, {dims: []int64{-1, 13}}}, "differ outside axis 0"},
		{"concat of other ranks", concat{1}, []shape{{dims: []int64{-1, 10}}, {dims: []int64{-1, 10, 1}}}, "want the same rank"},
		{"concat past the rank", concat{2}, []shape{{dims: []int64{-1, 10}}}, "axis 2 of a tensor of rank 2"},
		{"concat of sequences on axis 0", concat{0}, []shape{{dims: []int64{-1, 10}, lod: true, seqs: -1}}, "LoD tensors is not supported"},
		{"elementwise_add of another width", elementwiseAdd{1}, []shape{{dims: []int64{-1, 400}}, {dims: []int64{401}}}, "does not broadcast"},
		{"elementwise_add of a larger Y", elementwiseAdd{-1}, []shape{{dims: []int64{400}}, {dims: []int64{2, 400}}}, "more dimensions than input X"},
		{"sequence_pool of a dense tensor", sequencePool{pool: "SUM"}, []shape{{dims: []int64{-1, 10}}}, "has no LoD"},
		{"softmax along axis 0", softmax{0}, []shape{{dims: []int64{-1, 2}}}, "only the last axis"},
	} {
		if _, err := c.k.shape(c.in); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", c.name, err, c.want)
		}
	}
}

// runKernel runs one kernel as Run does, after its shape check.
func runKernel(t *testing.T, k kernel, in ...*value) *value {
	t.Helper()
	st := step{typ: fmt.Sprintf("%T", k), out: "out", kernel: k}
	env := map[string]*value{}
	for i, v := range in {
		name := fmt.Sprint("in", i)
		st.in, env[name] = append(st.in, name), v
	}
	out, err := st.eval(env, nil)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func seq(n int) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(i + 1)
	}
	return out
}

func near(a, b []float32) bool {
	return slices.EqualFunc(a, b, func(x, y float32) bool { return math.Abs(float64(x-y)) <= 1e-6 })
}

// Ops' builders refuse attributes of the wrong type and unknown pool types.
func TestBuildersRefuseAttributes(t *testing.T) {
	op := func(typ string, attrs map[string]paddle.Attr) paddle.Op {
		in := map[string][]string{"X": {"x"}}
		if typ == "mul" {
			in["Y"] = []string{"y"}
		}
		return paddle.Op{Type: typ, Inputs: in, Outputs: map[string][]string{"Out": {"o"}}, Attrs: attrs}
	}
	for _, c := range []struct {
		op   paddle.Op
		want string
	}{
		{op("sequence_pool", map[string]paddle.Attr{"pooltype": {Type: paddle.AttrString, String: "MEDIAN"}}), `pooltype "MEDIAN"`},
		{op("mul", map[string]paddle.Attr{"x_num_col_dims": {Type: paddle.AttrFloat}}), `attribute "x_num_col_dims" is FLOAT, want INT or LONG`},
		{op("scale", map[string]paddle.Attr{"bias_after_scale": {Type: paddle.AttrInt}}), `"bias_after_scale" is INT, want BOOLEAN`},
		{paddle.Op{Type: "scale", Inputs: map[string][]string{"X": {"x"}, "ScaleTensor": {"s"}}, Outputs: map[string][]string{"Out": {"o"}}}, "input ScaleTensor ([s]) is not supported"},
		{paddle.Op{Type: "relu", Inputs: map[string][]string{"X": {"x", "y"}}, Outputs: map[string][]string{"Out": {"o"}}}, "input X: want 1 variable, got 2"},
	} {
		shapes := map[string]shape{"x": {dims: []int64{-1, 2}}, "y": {dims: []int64{2, 2}}, "s": {dims: []int64{1}}}
		if _, _, err := compileOp(3, c.op, shapes); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %v: got %v, want an error containing %q", c.op.Type, slices.Sorted(maps.Keys(c.op.Attrs)), err, c.want)
		}
	}
}

// BenchmarkRunCTR runs one CTR prediction (a request of one sample) through
// the 273×400, 400×400, 400×400, 400×2 network.
func BenchmarkRunCTR(b *testing.B) {
	m := load(b, ctrModel)
	in := inputs(samples(1, 1))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.Run(in); err != nil {
			b.Fatal(err)
		}
	}
}
