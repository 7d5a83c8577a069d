// Package infer runs Paddle Fluid 1.x inference programs (a __model__ and its parameters, one
// file per variable) in pure Go, for the few ops a dense CTR network uses, so that the tests'
// stand-in for Paddle Serving returns the real model's predictions.
package infer

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/elasticctr/terraform-provider-ctr/cube/bounded"
	"github.com/elasticctr/terraform-provider-ctr/cube/paddle"
)

// MaxParamBytes bounds the parameter files of one model, together: far
// above a dense CTR network's, far below what would exhaust a test host.
const MaxParamBytes = 1 << 30

// maxElements bounds one tensor of a run (1 GiB of float32), far above any
// batch Serving sends: what a hostile Input asks for is refused, not
// allocated.
const maxElements = 1 << 28

// Model is a loaded inference program. Run may be called from several
// goroutines at once: a Model never changes after Load, and each Run keeps
// its tensors to itself.
type Model struct {
	feeds   []Feed
	fetches []string
	params  map[string]*value
	steps   []step
}

// Feed is an input of the program, as its variable declares it.
type Feed struct {
	Name string
	// Dims are the declared dims: -1 for one given at run time (the batch).
	Dims []int64
	// LoDLevel is 1 for a tensor of sequences (Input.LoD required), else 0
	// (Input.LoD optional).
	LoDLevel int
}

// Input is the value of a feed: Data row-major in Dims, and for a LoD feed
// the offsets of its sequences' rows, [0, 3, 5] for two sequences of 3 and
// 2 rows.
type Input struct {
	Data []float32
	Dims []int64
	LoD  []int64
}

// Output is the value of a fetched variable.
type Output struct {
	Data []float32
	Dims []int64
}

// Load reads <dir>/__model__ and the parameters beside it, one LoDTensor
// file per persistable variable (paddle.PersistableNames), and compiles
// block 0: every op must be one this package runs, read variables some feed,
// parameter or earlier op defines, and fit the shapes it needs.
func Load(dir string) (*Model, error) {
	if err := refuseCombined(dir); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "__model__")
	b, err := readFile(path, paddle.MaxProgramBytes)
	if err != nil {
		return nil, err
	}
	prog, err := paddle.ParseProgram(b)
	if err != nil {
		return nil, fmt.Errorf("%q: %w", path, err)
	}
	if len(prog.Blocks) == 0 {
		return nil, fmt.Errorf("%q: the program has no block", path)
	}
	block := prog.Blocks[0]
	params, err := loadParams(dir, block.Vars)
	if err != nil {
		return nil, err
	}
	m, _, err := compile(block, params)
	if err != nil {
		return nil, fmt.Errorf("%q: %w", path, err)
	}
	return m, nil
}

// Feeds lists the program's inputs in the order of their feed ops' col.
func (m *Model) Feeds() []Feed {
	out := make([]Feed, len(m.feeds))
	for i, f := range m.feeds {
		out[i] = Feed{Name: f.Name, Dims: slices.Clone(f.Dims), LoDLevel: f.LoDLevel}
	}
	return out
}

// Fetches lists the variables the program fetches, in the order of their
// fetch ops' col.
func (m *Model) Fetches() []string { return slices.Clone(m.fetches) }

// Run computes the fetched variables from a value for every feed. It reads
// in's slices and neither changes nor keeps them; what it returns is its own.
func (m *Model) Run(in map[string]Input) (map[string]Output, error) {
	env := make(map[string]*value, len(m.feeds)+len(m.steps))
	for _, f := range m.feeds {
		v, ok := in[f.Name]
		if !ok {
			return nil, fmt.Errorf("feed %q is missing (the model's feeds: %s)", f.Name, m.feedNames())
		}
		val, err := f.value(v)
		if err != nil {
			return nil, err
		}
		env[f.Name] = val
	}
	if len(in) != len(m.feeds) {
		for name := range in {
			if _, ok := env[name]; !ok {
				return nil, fmt.Errorf("%q is not a feed of the model (its feeds: %s)", name, m.feedNames())
			}
		}
	}
	for _, st := range m.steps {
		out, err := st.eval(env, m.params)
		if err != nil {
			return nil, err
		}
		env[st.out] = out
	}
	res := make(map[string]Output, len(m.fetches))
	for _, name := range m.fetches {
		v := lookup(env, m.params, name)
		res[name] = Output{Data: slices.Clone(v.data), Dims: slices.Clone(v.dims)}
	}
	return res, nil
}

func (m *Model) feedNames() string {
	names := make([]string, len(m.feeds))
	for i, f := range m.feeds {
		names[i] = f.Name
	}
	return strings.Join(names, ", ")
}

// value is a tensor of a run: its data, dims and level-1 LoD (nil for none).
type value struct {
	data []float32
	dims []int64
	lod  []int64
}

func (v *value) shape() shape {
	return shape{dims: v.dims, lod: v.lod != nil, seqs: int64(len(v.lod)) - 1}
}

// shape is what is known of a variable before its data: its dims (-1 for
// one known only at run time) and whether it carries a LoD, of how many
// sequences (-1 where unknown). At Load, shapes come from the program's
// declarations and the parameters' files; in Run, from the values.
type shape struct {
	dims []int64
	lod  bool
	seqs int64
}

// step is one compiled op: its kernel, the variables it reads (in the
// order the kernel takes them) and the one it writes.
type step struct {
	index int
	typ   string
	in    []string
	out   string
	kernel
}

// kernel is an op's computation. shape checks the op's inputs and gives
// its output's, with -1 where an input's is unknown; run fills out, whose
// data and dims shape sized, and is called only on inputs shape accepted.
// An output carries its first input's LoD where shape says lod.
type kernel interface {
	shape(in []shape) (shape, error)
	run(in []*value, out *value)
}

func (st *step) eval(env, params map[string]*value) (*value, error) {
	args := make([]*value, len(st.in))
	shapes := make([]shape, len(st.in))
	for i, name := range st.in {
		args[i] = lookup(env, params, name)
		shapes[i] = args[i].shape()
	}
	sh, err := st.shape(shapes)
	if err != nil {
		return nil, fmt.Errorf("op %d (%s): %w", st.index, st.typ, err)
	}
	n, err := numel(sh.dims)
	if err == nil && n < 0 {
		err = fmt.Errorf("output dims %v unknown after its inputs' are known", sh.dims)
	}
	if err != nil {
		return nil, fmt.Errorf("op %d (%s): %w", st.index, st.typ, err)
	}
	out := &value{data: make([]float32, n), dims: sh.dims}
	if sh.lod {
		// Every op that passes a LoD on keeps its input's rows: checked, so
		// that a broken kernel fails here and not with an index out of range.
		if len(sh.dims) == 0 || len(args[0].dims) == 0 || sh.dims[0] != args[0].dims[0] {
			return nil, fmt.Errorf("op %d (%s): output dims %v cannot carry the LoD of input dims %v", st.index, st.typ, sh.dims, args[0].dims)
		}
		out.lod = args[0].lod
	}
	st.run(args, out)
	return out, nil
}

// lookup finds a variable of a run: a feed or op output, else a parameter.
// compile has checked that one of them defines it.
func lookup(env, params map[string]*value, name string) *value {
	if v, ok := env[name]; ok {
		return v
	}
	return params[name]
}

// value checks an Input against the feed's declaration.
func (f Feed) value(in Input) (*value, error) {
	if len(in.Dims) != len(f.Dims) {
		return nil, fmt.Errorf("feed %q: dims %v, want %d dims (the model declares %v)", f.Name, in.Dims, len(f.Dims), f.Dims)
	}
	for i, d := range in.Dims {
		if d < 0 || (f.Dims[i] >= 0 && d != f.Dims[i]) {
			return nil, fmt.Errorf("feed %q: dims %v, the model declares %v (-1 for any size)", f.Name, in.Dims, f.Dims)
		}
	}
	n, err := numel(in.Dims)
	if err != nil {
		return nil, fmt.Errorf("feed %q: %w", f.Name, err)
	}
	if int64(len(in.Data)) != n {
		return nil, fmt.Errorf("feed %q: %d values for dims %v, which hold %d", f.Name, len(in.Data), in.Dims, n)
	}
	v := &value{data: in.Data, dims: in.Dims}
	// Paddle's feed op hands a LoD on whatever the program declares: a
	// feed of lod_level 0 may carry one too, checked alike.
	if f.LoDLevel == 1 || len(in.LoD) > 0 {
		if err := checkLoD(in.LoD, in.Dims); err != nil {
			return nil, fmt.Errorf("feed %q (lod_level %d): %w", f.Name, f.LoDLevel, err)
		}
		v.lod = in.LoD
	}
	return v, nil
}

// checkLoD checks level-1 offsets into the rows of dims: from 0, never
// decreasing, to the row count.
func checkLoD(lod, dims []int64) error {
	switch {
	case len(lod) == 0:
		return errors.New("no LoD: want the offsets of its sequences' rows, such as [0 3 5] for two sequences")
	case len(dims) == 0:
		return errors.New("a scalar cannot hold sequences")
	case lod[0] != 0:
		return fmt.Errorf("LoD %v: the offsets must start at 0", lod)
	case lod[len(lod)-1] != dims[0]:
		return fmt.Errorf("LoD %v: the offsets must end at the row count %d", lod, dims[0])
	}
	for i := 1; i < len(lod); i++ {
		if lod[i] < lod[i-1] {
			return fmt.Errorf("LoD %v: offset %d is below the one before it", lod, i)
		}
	}
	return nil
}

// numel is the product of dims, -1 if one of them is -1 (known only at run
// time); more than maxElements is an error.
func numel(dims []int64) (int64, error) {
	n, unknown := int64(1), false
	for _, d := range dims {
		switch {
		case d < 0:
			unknown = true
		case d == 0:
			return 0, nil
		case n > maxElements/d:
			return 0, fmt.Errorf("dims %v: more than %d elements", dims, maxElements)
		default:
			n *= d
		}
	}
	if unknown {
		return -1, nil
	}
	return n, nil
}

// compile turns block 0 into steps, checking each op's shapes against what
// the feeds declare and the parameters hold; it also returns the shape
// known at load of every variable the block defines.
func compile(b paddle.Block, params map[string]*value) (*Model, map[string]shape, error) {
	vars := make(map[string]paddle.Var, len(b.Vars))
	for _, v := range b.Vars {
		vars[v.Name] = v
	}
	shapes := make(map[string]shape, len(b.Vars))
	for name, p := range params {
		shapes[name] = p.shape()
	}
	m := &Model{params: params}
	var feedCols, fetchCols []int
	for i, op := range b.Ops {
		switch op.Type {
		case "feed":
			f, col, err := feedOf(op, vars)
			if err != nil {
				return nil, nil, fmt.Errorf("op %d (feed): %w", i, err)
			}
			m.feeds, feedCols = append(m.feeds, f), append(feedCols, col)
			shapes[f.Name] = shape{dims: f.Dims, lod: f.LoDLevel == 1, seqs: -1}
		case "fetch":
			name, col, err := fetchOf(op)
			if err != nil {
				return nil, nil, fmt.Errorf("op %d (fetch): %w", i, err)
			}
			if _, ok := shapes[name]; !ok {
				return nil, nil, fmt.Errorf("op %d (fetch) reads %q, which no feed, parameter or earlier op defines", i, name)
			}
			m.fetches, fetchCols = append(m.fetches, name), append(fetchCols, col)
		default:
			st, sh, err := compileOp(i, op, shapes)
			if err != nil {
				return nil, nil, err
			}
			m.steps = append(m.steps, st)
			shapes[st.out] = sh
		}
	}
	var err error
	if m.feeds, err = byCol("feed", m.feeds, feedCols); err != nil {
		return nil, nil, err
	}
	if m.fetches, err = byCol("fetch", m.fetches, fetchCols); err != nil {
		return nil, nil, err
	}
	if len(m.fetches) == 0 {
		return nil, nil, errors.New("block 0 has no fetch op: nothing to compute")
	}
	return m, shapes, nil
}

func compileOp(i int, op paddle.Op, shapes map[string]shape) (step, shape, error) {
	build, ok := builders[op.Type]
	if !ok {
		known := append(slices.Sorted(maps.Keys(builders)), "feed", "fetch")
		return step{}, shape{}, fmt.Errorf("op %d is %q, which this interpreter does not run (it runs %s)", i, op.Type, strings.Join(known, ", "))
	}
	err := onlyInputs(op, build.inputs)
	var (
		k   kernel
		in  []string
		out string
	)
	if err == nil {
		k, in, err = build.build(op)
	}
	if err == nil {
		out, err = single(op.Outputs, "output", "Out")
	}
	if err != nil {
		return step{}, shape{}, fmt.Errorf("op %d (%s): %w", i, op.Type, err)
	}
	st := step{index: i, typ: op.Type, in: in, out: out, kernel: k}
	ins := make([]shape, len(in))
	for j, name := range in {
		sh, ok := shapes[name]
		if !ok {
			return step{}, shape{}, fmt.Errorf("op %d (%s) reads %q, which no feed, parameter or earlier op defines", i, op.Type, name)
		}
		ins[j] = sh
	}
	sh, err := k.shape(ins)
	if err != nil {
		return step{}, shape{}, fmt.Errorf("op %d (%s): %w", i, op.Type, err)
	}
	return st, sh, nil
}

// feedOf reads a feed op: X the feed list, Out the variable, col its place.
func feedOf(op paddle.Op, vars map[string]paddle.Var) (Feed, int, error) {
	name, err := single(op.Outputs, "output", "Out")
	if err != nil {
		return Feed{}, 0, err
	}
	col, err := intAttr(op, "col", -1)
	if err != nil {
		return Feed{}, 0, err
	}
	v, ok := vars[name]
	switch {
	case !ok:
		return Feed{}, 0, fmt.Errorf("feeds %q, which block 0 does not declare", name)
	case v.DataType != paddle.FP32:
		return Feed{}, 0, fmt.Errorf("feeds %q of %s: this interpreter computes in float32", name, v.DataType)
	case v.LoDLevel > 1:
		return Feed{}, 0, fmt.Errorf("feeds %q of lod_level %d: this interpreter takes 0 or 1", name, v.LoDLevel)
	}
	return Feed{Name: name, Dims: slices.Clone(v.Dims), LoDLevel: v.LoDLevel}, int(col), nil
}

// fetchOf reads a fetch op: X the variable, Out the fetch list, col its place.
func fetchOf(op paddle.Op) (string, int, error) {
	name, err := single(op.Inputs, "input", "X")
	if err != nil {
		return "", 0, err
	}
	col, err := intAttr(op, "col", -1)
	return name, int(col), err
}

// byCol orders feeds or fetches by their ops' col, which must number them
// 0..n-1 (Paddle's prepend_feed_ops writes them last col first).
func byCol[T any](what string, items []T, cols []int) ([]T, error) {
	out := make([]T, len(items))
	seen := make([]bool, len(items))
	for i, c := range cols {
		if c < 0 || c >= len(items) || seen[c] {
			return nil, fmt.Errorf("%s ops' col attributes %v: want each of 0..%d once", what, cols, len(items)-1)
		}
		out[c], seen[c] = items[i], true
	}
	return out, nil
}

// refuseCombined refuses a model whose parameters are one combined file.
func refuseCombined(dir string) error {
	combined, err := filepath.Glob(filepath.Join(dir, "*.pdiparams"))
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(dir, "__params__")); err == nil {
		combined = append(combined, filepath.Join(dir, "__params__"))
	}
	if len(combined) > 0 {
		return fmt.Errorf("%q: combined parameters are not supported by this interpreter: save the model with one file per parameter (save_inference_model without params_filename)", combined[0])
	}
	return nil
}

// loadParams reads the persistable variables of vars, one LoDTensor file
// each, MaxParamBytes together, and checks them against their declarations.
func loadParams(dir string, vars []paddle.Var) (map[string]*value, error) {
	declared := make(map[string]paddle.Var, len(vars))
	for _, v := range vars {
		declared[v.Name] = v
	}
	params := map[string]*value{}
	left := int64(MaxParamBytes)
	for _, name := range paddle.PersistableNames(vars) {
		if !filepath.IsLocal(name) {
			return nil, fmt.Errorf("parameter %q: not a file name inside %q", name, dir)
		}
		path := filepath.Join(dir, name)
		b, err := readFile(path, left)
		if errors.Is(err, bounded.ErrTooLarge) {
			return nil, fmt.Errorf("%w (the parameters of one model may take %d bytes together)", err, MaxParamBytes)
		}
		if err != nil {
			return nil, fmt.Errorf("parameter %q: %w", name, err)
		}
		left -= int64(len(b))
		f := paddle.NewFile(path, bytes.NewReader(b), int64(len(b)))
		t, err := f.LoDTensor()
		if err != nil {
			return nil, err
		}
		if t.DType != paddle.FP32 {
			return nil, fmt.Errorf("%q: %s: this interpreter computes in float32", path, t)
		}
		if d := declared[name].Dims; len(d) > 0 && !fits(t.Dims, d) {
			return nil, fmt.Errorf("%q holds %s, but the program declares %v", path, t, d)
		}
		params[name] = &value{data: paddle.Float32s(b[t.Data:t.End()]), dims: t.Dims}
	}
	return params, nil
}

// fits tells whether dims match declared, where -1 matches any size.
func fits(dims, declared []int64) bool {
	if len(dims) != len(declared) {
		return false
	}
	for i, d := range declared {
		if d >= 0 && dims[i] != d {
			return false
		}
	}
	return true
}

// readFile reads a file whole, up to max bytes.
func readFile(path string, max int64) ([]byte, error) {
	b, err := bounded.ReadFile(path, max)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%q is missing: %w", path, err)
	}
	return b, err
}
