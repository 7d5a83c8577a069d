package infer

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/elasticctr/terraform-provider-ctr/cube/paddle"
)

// builder reads an op's attributes and arguments into its kernel and the
// variables the kernel takes, in order. inputs are the input parameters the
// op may bind: any other, bound to a variable, is refused (ScaleTensor,
// AxisTensor and the like would change what the op computes).
type builder struct {
	inputs []string
	build  func(op paddle.Op) (kernel, []string, error)
}

// builders are the ops this interpreter runs, besides feed and fetch. Their
// semantics are Paddle Fluid 1.x's CPU kernels (paddle/fluid/operators).
var builders = map[string]builder{
	"sequence_pool":   {[]string{"X"}, newSequencePool},
	"concat":          {[]string{"X"}, newConcat},
	"mul":             {[]string{"X", "Y"}, newMul},
	"elementwise_add": {[]string{"X", "Y"}, newElementwiseAdd},
	"relu":            {[]string{"X"}, unary(relu{})},
	"softmax":         {[]string{"X"}, newSoftmax},
	"scale":           {[]string{"X"}, newScale},
}

// sequencePool pools each sequence of a level-1 LoD tensor into one row:
// out[i] = pool(x[lod[i]:lod[i+1]]). An empty sequence gives a row of
// pad_value (Paddle's sequence_pooling.cc; programs older than the
// attribute get its default, 0).
type sequencePool struct {
	pool string
	pad  float32
}

var poolTypes = []string{"AVERAGE", "SUM", "SQRT", "MAX", "LAST", "FIRST"}

func newSequencePool(op paddle.Op) (kernel, []string, error) {
	x, err := single(op.Inputs, "input", "X")
	if err != nil {
		return nil, nil, err
	}
	pool, err := stringAttr(op, "pooltype", "AVERAGE")
	if err != nil {
		return nil, nil, err
	}
	if !slices.Contains(poolTypes, pool) {
		return nil, nil, fmt.Errorf("pooltype %q: want one of %v", pool, poolTypes)
	}
	pad, err := floatAttr(op, "pad_value", 0)
	return sequencePool{pool, pad}, []string{x}, err
}

func (p sequencePool) shape(in []shape) (shape, error) {
	x := in[0]
	if !x.lod {
		return shape{}, fmt.Errorf("input X (dims %v) has no LoD: sequence_pool pools the sequences of a LoD tensor", x.dims)
	}
	if len(x.dims) == 0 {
		return shape{}, errors.New("input X is a scalar: want a tensor of rows")
	}
	dims := slices.Clone(x.dims)
	dims[0] = x.seqs
	return shape{dims: dims}, nil
}

func (p sequencePool) run(in []*value, out *value) {
	x := in[0]
	w := width(x.dims)
	for s := range len(x.lod) - 1 {
		rows := x.data[x.lod[s]*w : x.lod[s+1]*w]
		o := out.data[int64(s)*w : int64(s+1)*w]
		h := x.lod[s+1] - x.lod[s]
		if h == 0 {
			for j := range o {
				o[j] = p.pad
			}
			continue
		}
		switch p.pool {
		case "FIRST":
			copy(o, rows[:w])
		case "LAST":
			copy(o, rows[(h-1)*w:])
		case "MAX":
			copy(o, rows[:w])
			for r := int64(1); r < h; r++ {
				for j, v := range rows[r*w : (r+1)*w] {
					o[j] = max(o[j], v)
				}
			}
		default:
			for r := range h {
				for j, v := range rows[r*w : (r+1)*w] {
					o[j] += v
				}
			}
			div := float32(1)
			switch p.pool {
			case "AVERAGE":
				div = float32(h)
			case "SQRT":
				div = float32(math.Sqrt(float64(h)))
			}
			if div != 1 {
				for j := range o {
					o[j] /= div
				}
			}
		}
	}
}

// width is the elements of one row: the product of every dimension but
// the first.
func width(dims []int64) int64 {
	w := int64(1)
	for _, d := range dims[1:] {
		w *= d
	}
	return w
}

// concat joins its inputs along axis (negative counts from the end); the
// other dimensions must agree. The output has the first input's LoD.
type concat struct{ axis int }

func newConcat(op paddle.Op) (kernel, []string, error) {
	xs := op.Inputs["X"]
	if len(xs) == 0 {
		return nil, nil, errors.New("input X: no variable")
	}
	axis, err := intAttr(op, "axis", 0)
	return concat{int(axis)}, slices.Clone(xs), err
}

func (c concat) shape(in []shape) (shape, error) {
	rank := len(in[0].dims)
	a, err := normAxis(c.axis, rank)
	if err != nil {
		return shape{}, err
	}
	dims := slices.Clone(in[0].dims)
	for i, x := range in[1:] {
		if len(x.dims) != rank {
			return shape{}, fmt.Errorf("input %d has dims %v, input 0 %v: want the same rank", i+1, x.dims, in[0].dims)
		}
		for j, d := range x.dims {
			switch {
			case j == a:
				if dims[j] < 0 || d < 0 {
					dims[j] = -1
				} else {
					dims[j] += d
				}
			case dims[j] < 0:
				dims[j] = d
			case d >= 0 && d != dims[j]:
				return shape{}, fmt.Errorf("input %d has dims %v, input 0 %v: they differ outside axis %d", i+1, x.dims, in[0].dims, a)
			}
		}
	}
	for _, x := range in {
		if a == 0 && x.lod {
			return shape{}, errors.New("concat along axis 0 of LoD tensors is not supported")
		}
	}
	return shape{dims: dims, lod: in[0].lod, seqs: in[0].seqs}, nil
}

func (c concat) run(in []*value, out *value) {
	a, _ := normAxis(c.axis, len(out.dims))
	outer := int64(1)
	for _, d := range out.dims[:a] {
		outer *= d
	}
	chunks := make([]int64, len(in))
	for i, x := range in {
		chunks[i] = int64(len(x.data))
		if outer > 0 {
			chunks[i] /= outer
		}
	}
	o := out.data
	for r := range outer {
		for i, x := range in {
			n := copy(o, x.data[r*chunks[i]:(r+1)*chunks[i]])
			o = o[n:]
		}
	}
}

// normAxis turns a negative axis into one counted from the front.
func normAxis(axis, rank int) (int, error) {
	a := axis
	if a < 0 {
		a += rank
	}
	if a < 0 || a >= rank {
		return 0, fmt.Errorf("axis %d of a tensor of rank %d", axis, rank)
	}
	return a, nil
}

// mul flattens X to a matrix of its first x_num_col_dims dimensions by the
// rest, Y likewise by y_num_col_dims, and multiplies them: out has X's
// leading dimensions and Y's trailing ones, and X's LoD.
type mul struct{ xn, yn int }

func newMul(op paddle.Op) (kernel, []string, error) {
	in, err := inputsXY(op)
	if err != nil {
		return nil, nil, err
	}
	xn, err := intAttr(op, "x_num_col_dims", 1)
	if err != nil {
		return nil, nil, err
	}
	yn, err := intAttr(op, "y_num_col_dims", 1)
	return mul{int(xn), int(yn)}, in, err
}

func (m mul) shape(in []shape) (shape, error) {
	x, y := in[0], in[1]
	if m.xn < 1 || m.xn >= len(x.dims) || m.yn < 1 || m.yn >= len(y.dims) {
		return shape{}, fmt.Errorf("x_num_col_dims %d and y_num_col_dims %d for X %v and Y %v: want each at least 1 and below its input's rank", m.xn, m.yn, x.dims, y.dims)
	}
	kx, err := numel(x.dims[m.xn:])
	if err != nil {
		return shape{}, err
	}
	ky, err := numel(y.dims[:m.yn])
	if err != nil {
		return shape{}, err
	}
	if kx >= 0 && ky >= 0 && kx != ky {
		return shape{}, fmt.Errorf("input X %v flattens to %d columns, input Y %v to %d rows: they must agree", x.dims, kx, y.dims, ky)
	}
	dims := append(slices.Clone(x.dims[:m.xn]), y.dims[m.yn:]...)
	return shape{dims: dims, lod: x.lod, seqs: x.seqs}, nil
}

// run multiplies in i-k-j order: the inner loop runs along a row of Y and a
// row of out, both contiguous.
func (m mul) run(in []*value, out *value) {
	x, y := in[0], in[1]
	k, _ := numel(x.dims[m.xn:])
	n, _ := numel(y.dims[m.yn:])
	if k == 0 || n == 0 {
		return
	}
	rows := int64(len(x.data)) / k
	for i := range rows {
		o := out.data[i*n : (i+1)*n]
		for p, a := range x.data[i*k : (i+1)*k] {
			wrow := y.data[int64(p)*n : int64(p+1)*n]
			o := o[:len(wrow)]
			for j, w := range wrow {
				o[j] += a * w
			}
		}
	}
}

// elementwiseAdd adds Y to X, Y broadcast over X as Paddle 1.x does: dims
// equal, or Y's dims (less trailing 1s) equal to X's from axis on (axis -1:
// Y aligned with X's last dimensions). out has X's dims and LoD.
type elementwiseAdd struct{ axis int }

func newElementwiseAdd(op paddle.Op) (kernel, []string, error) {
	in, err := inputsXY(op)
	if err != nil {
		return nil, nil, err
	}
	axis, err := intAttr(op, "axis", -1)
	return elementwiseAdd{int(axis)}, in, err
}

func (e elementwiseAdd) shape(in []shape) (shape, error) {
	x, y := in[0], in[1]
	if _, _, _, err := e.broadcast(x.dims, y.dims); err != nil {
		return shape{}, err
	}
	return shape{dims: slices.Clone(x.dims), lod: x.lod, seqs: x.seqs}, nil
}

// broadcast splits X into pre × n × post elements, n those Y holds: out[p,
// i, q] = x[p, i, q] + y[i]. Unknown (-1) dims match any.
func (e elementwiseAdd) broadcast(x, y []int64) (pre, n, post int64, err error) {
	if fits(x, y) || fits(y, x) {
		n, err = numel(x)
		return 1, n, 1, err
	}
	if len(y) > len(x) {
		return 0, 0, 0, fmt.Errorf("input Y %v has more dimensions than input X %v", y, x)
	}
	a := e.axis
	if a == -1 {
		a = len(x) - len(y)
	}
	if a < 0 || a >= len(x) {
		return 0, 0, 0, fmt.Errorf("axis %d of X %v", e.axis, x)
	}
	trimmed := y
	for len(trimmed) > 0 && trimmed[len(trimmed)-1] == 1 {
		trimmed = trimmed[:len(trimmed)-1]
	}
	if a+len(trimmed) > len(x) || !fits(x[a:a+len(trimmed)], trimmed) {
		return 0, 0, 0, fmt.Errorf("input Y %v does not broadcast over input X %v from axis %d", y, x, a)
	}
	if pre, err = numel(x[:a]); err == nil {
		if n, err = numel(trimmed); err == nil {
			post, err = numel(x[a+len(trimmed):])
		}
	}
	return pre, n, post, err
}

func (e elementwiseAdd) run(in []*value, out *value) {
	x, y := in[0], in[1]
	pre, n, post, _ := e.broadcast(x.dims, y.dims)
	for p := range pre {
		for i := range n {
			b := y.data[i]
			at := (p*n + i) * post
			xs, o := x.data[at:at+post], out.data[at:at+post]
			for q, v := range xs {
				o[q] = v + b
			}
		}
	}
}

// elementwise is an op that maps each element alone: out has X's dims and
// LoD.
type elementwise interface{ apply(v float32) float32 }

type unaryKernel struct{ f elementwise }

func unary(f elementwise) func(op paddle.Op) (kernel, []string, error) {
	return func(op paddle.Op) (kernel, []string, error) {
		x, err := single(op.Inputs, "input", "X")
		return unaryKernel{f}, []string{x}, err
	}
}

func (u unaryKernel) shape(in []shape) (shape, error) {
	return shape{dims: slices.Clone(in[0].dims), lod: in[0].lod, seqs: in[0].seqs}, nil
}

func (u unaryKernel) run(in []*value, out *value) {
	for i, v := range in[0].data {
		out.data[i] = u.f.apply(v)
	}
}

// relu is max(x, 0).
type relu struct{}

func (relu) apply(v float32) float32 {
	if v > 0 {
		return v
	}
	return 0
}

// scaleOp is scale·x + bias, or scale·(x + bias) where bias_after_scale is
// false.
type scaleOp struct {
	scale, bias float32
	after       bool
}

func newScale(op paddle.Op) (kernel, []string, error) {
	s := scaleOp{}
	var err error
	if s.scale, err = floatAttr(op, "scale", 1); err != nil {
		return nil, nil, err
	}
	if s.bias, err = floatAttr(op, "bias", 0); err != nil {
		return nil, nil, err
	}
	if s.after, err = boolAttr(op, "bias_after_scale", true); err != nil {
		return nil, nil, err
	}
	return unary(s)(op)
}

func (s scaleOp) apply(v float32) float32 {
	if s.after {
		return s.scale*v + s.bias
	}
	return s.scale * (v + s.bias)
}

// softmax normalises along the last axis, the only one supported:
// exp(x - max) / Σ exp(x - max), each x - max clipped at -64 as Paddle's
// SoftmaxFunctor does. out has X's dims and LoD.
type softmax struct{ axis int }

func newSoftmax(op paddle.Op) (kernel, []string, error) {
	x, err := single(op.Inputs, "input", "X")
	if err != nil {
		return nil, nil, err
	}
	axis, err := intAttr(op, "axis", -1)
	return softmax{int(axis)}, []string{x}, err
}

func (s softmax) shape(in []shape) (shape, error) {
	x := in[0]
	if a, err := normAxis(s.axis, len(x.dims)); err != nil || a != len(x.dims)-1 {
		return shape{}, fmt.Errorf("softmax along axis %d of X %v: only the last axis is supported", s.axis, x.dims)
	}
	return shape{dims: slices.Clone(x.dims), lod: x.lod, seqs: x.seqs}, nil
}

func (s softmax) run(in []*value, out *value) {
	d := int(in[0].dims[len(in[0].dims)-1])
	if d == 0 {
		return
	}
	for at := 0; at < len(in[0].data); at += d {
		xs, o := in[0].data[at:at+d], out.data[at:at+d]
		top := slices.Max(xs)
		var sum float64
		for j, v := range xs {
			e := math.Exp(float64(max(v-top, -64)))
			o[j], sum = float32(e), sum+e
		}
		for j := range o {
			o[j] = float32(float64(o[j]) / sum)
		}
	}
}

// single is the one variable bound to an op's parameter.
func single(m map[string][]string, what, param string) (string, error) {
	if vs := m[param]; len(vs) != 1 {
		return "", fmt.Errorf("%s %s: want 1 variable, got %d (%v)", what, param, len(vs), vs)
	}
	return m[param][0], nil
}

// inputsXY are the variables of a binary op's inputs X and Y, in that order.
func inputsXY(op paddle.Op) ([]string, error) {
	x, err := single(op.Inputs, "input", "X")
	if err != nil {
		return nil, err
	}
	y, err := single(op.Inputs, "input", "Y")
	return []string{x, y}, err
}

// onlyInputs refuses an input parameter, bound to a variable, that the op's
// kernel does not take.
func onlyInputs(op paddle.Op, allowed []string) error {
	for _, p := range slices.Sorted(maps.Keys(op.Inputs)) {
		if len(op.Inputs[p]) > 0 && !slices.Contains(allowed, p) {
			return fmt.Errorf("input %s (%v) is not supported: this interpreter takes %v", p, op.Inputs[p], allowed)
		}
	}
	return nil
}

// attr reads op's attribute name as get does, which also says whether the attribute has
// the type wanted (named in the error); an attribute the op does not have (a program older
// than the attribute) is def.
func attr[T any](op paddle.Op, name string, def T, want string, get func(paddle.Attr) (T, bool)) (T, error) {
	a, ok := op.Attrs[name]
	if !ok {
		return def, nil
	}
	if v, ok := get(a); ok {
		return v, nil
	}
	var zero T
	return zero, fmt.Errorf("attribute %q is %s, want %s", name, a.Type, want)
}

func intAttr(op paddle.Op, name string, def int64) (int64, error) {
	return attr(op, name, def, "INT or LONG", func(a paddle.Attr) (int64, bool) {
		switch a.Type {
		case paddle.AttrInt:
			return int64(a.Int), true
		case paddle.AttrLong:
			return a.Long, true
		}
		return 0, false
	})
}

func floatAttr(op paddle.Op, name string, def float32) (float32, error) {
	return attr(op, name, def, "FLOAT", func(a paddle.Attr) (float32, bool) { return a.Float, a.Type == paddle.AttrFloat })
}

func stringAttr(op paddle.Op, name, def string) (string, error) {
	return attr(op, name, def, "STRING", func(a paddle.Attr) (string, bool) { return a.String, a.Type == paddle.AttrString })
}

func boolAttr(op paddle.Op, name string, def bool) (bool, error) {
	return attr(op, name, def, "BOOLEAN", func(a paddle.Attr) (bool, bool) { return a.Bool, a.Type == paddle.AttrBool })
}
