package paddle

import (
	"bufio"
	"bytes"
	"fmt"
	"maps"
	"math"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/elasticctr/terraform-provider-ctr/internal/cubetest"
	"google.golang.org/protobuf/encoding/protowire"
)

func parseFixture(t *testing.T, rel string) *Program {
	t.Helper()
	b := cubetest.ReadPaddleData(t, rel)
	p, err := ParseProgram(b)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// The README's counts of the serving CTR model: one block of 129 variables
// and 68 ops, its feeds and its fetch.
func TestParseProgramServingCTRModel(t *testing.T) {
	p := parseFixture(t, "serving-ctr-model/ctr_prediction/__model__")
	if len(p.Blocks) != 1 || p.Version != 0 {
		t.Fatalf("%d blocks, version %d: want 1 block and no version", len(p.Blocks), p.Version)
	}
	b := p.Blocks[0]
	if len(b.Vars) != 129 || len(b.Ops) != 68 || b.Idx != 0 || b.ParentIdx != -1 {
		t.Fatalf("block %d (parent %d): %d vars and %d ops, want block 0 (parent -1) of 129 and 68", b.Idx, b.ParentIdx, len(b.Vars), len(b.Ops))
	}
	counts := map[string]int{}
	for _, op := range b.Ops {
		counts[op.Type]++
	}
	want := map[string]int{"feed": 27, "sequence_pool": 26, "concat": 1, "mul": 4, "elementwise_add": 4, "relu": 3, "softmax": 1, "scale": 1, "fetch": 1}
	if !maps.Equal(counts, want) {
		t.Errorf("op counts %v, want %v", counts, want)
	}
	vars := map[string]Var{}
	for _, v := range b.Vars {
		vars[v.Name] = v
	}
	feeds := map[string]bool{}
	for _, op := range b.Ops {
		switch op.Type {
		case "feed":
			feeds[op.Outputs["Out"][0]] = true
		case "fetch":
			if x := op.Inputs["X"]; !slices.Equal(x, []string{"save_infer_model/scale_0"}) {
				t.Errorf("fetch of %v, want save_infer_model/scale_0", x)
			}
		}
	}
	check := func(name string, dims []int64, lod int) {
		t.Helper()
		v := vars[name]
		if !feeds[name] || v.DataType != FP32 || !slices.Equal(v.Dims, dims) || v.LoDLevel != lod || v.Type != 7 {
			t.Errorf("%s: fed %v, %s %v lod_level %d type %d; want a fed LOD_TENSOR FP32 %v lod_level %d", name, feeds[name], v.DataType, v.Dims, v.LoDLevel, v.Type, dims, lod)
		}
	}
	check("dense_input", []int64{-1, 13}, 0)
	for i := range 26 {
		check(fmt.Sprintf("embedding_%d.tmp_0", i), []int64{-1, 10}, 1)
	}
	if v := vars["save_infer_model/scale_0"]; !slices.Equal(v.Dims, []int64{-1, 2}) {
		t.Errorf("the fetched variable has dims %v, want [-1 2]", v.Dims)
	}
}

// Every variable and op of the binary program is what Paddle's own text
// dump of it says, field by field.
func TestParseProgramMatchesItsTextDump(t *testing.T) {
	p := parseFixture(t, "serving-ctr-model/ctr_prediction/__model__")
	f, err := os.Open(cubetest.PaddleData(t, "serving-ctr-model/ctr_prediction/__model__.prototxt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	root, err := parseTextProto(f)
	if err != nil {
		t.Fatal(err)
	}
	blocks := root.kids["blocks"]
	if len(blocks) != len(p.Blocks) {
		t.Fatalf("%d blocks in the dump, %d decoded", len(blocks), len(p.Blocks))
	}
	tb, b := blocks[0], p.Blocks[0]
	if len(tb.kids["vars"]) != len(b.Vars) || len(tb.kids["ops"]) != len(b.Ops) {
		t.Fatalf("the dump has %d vars and %d ops, decoded %d and %d", len(tb.kids["vars"]), len(tb.kids["ops"]), len(b.Vars), len(b.Ops))
	}
	varTypes := map[int32]string{7: "LOD_TENSOR", 9: "FEED_MINIBATCH", 10: "FETCH_LIST"}
	for i, tv := range tb.kids["vars"] {
		v := b.Vars[i]
		typ := tv.kid("type")
		want := fmt.Sprintf("%s %s %s", tv.one("name"), typ.one("type"), tv.one("persistable"))
		got := fmt.Sprintf("%q %s %t", v.Name, varTypes[v.Type], v.Persistable)
		if lt := typ.kid("lod_tensor"); lt != nil {
			tt := lt.kid("tensor")
			want += fmt.Sprintf(" %s %v %s", tt.one("data_type"), tt.fields["dims"], or(lt.one("lod_level"), "0"))
			got += fmt.Sprintf(" %s %v %d", v.DataType, int64s(v.Dims), v.LoDLevel)
		}
		if got != want {
			t.Errorf("var %d: decoded %s, the dump says %s", i, got, want)
		}
	}
	for i, to := range tb.kids["ops"] {
		op := b.Ops[i]
		if want := to.one("type"); strconv.Quote(op.Type) != want {
			t.Errorf("op %d is %q, the dump says %s", i, op.Type, want)
		}
		for _, io := range []struct {
			key string
			got map[string][]string
		}{{"inputs", op.Inputs}, {"outputs", op.Outputs}} {
			want := map[string][]string{}
			for _, tv := range to.kids[io.key] {
				want[unquote(t, tv.one("parameter"))] = unquoteAll(t, tv.fields["arguments"])
			}
			if !maps.EqualFunc(io.got, want, slices.Equal) {
				t.Errorf("op %d (%s) %s %v, the dump says %v", i, op.Type, io.key, io.got, want)
			}
		}
		if len(op.Attrs) != len(to.kids["attrs"]) {
			t.Errorf("op %d (%s): %d attrs, the dump has %d", i, op.Type, len(op.Attrs), len(to.kids["attrs"]))
		}
		for _, ta := range to.kids["attrs"] {
			name := unquote(t, ta.one("name"))
			a, ok := op.Attrs[name]
			if !ok {
				t.Errorf("op %d (%s) has no attribute %q", i, op.Type, name)
				continue
			}
			want := ta.one("type") + " " + ta.one("i") + ta.one("f") + ta.one("s") + ta.one("b") + fmt.Sprint(len(ta.fields["strings"]))
			got := a.Type.String() + " "
			switch a.Type {
			case AttrInt:
				got += fmt.Sprint(a.Int)
			case AttrFloat:
				got += strconv.FormatFloat(float64(a.Float), 'f', 1, 32)
			case AttrString:
				got += strconv.Quote(a.String)
			case AttrBool:
				got += strconv.FormatBool(a.Bool)
			}
			got += fmt.Sprint(len(a.Strings))
			if got != want {
				t.Errorf("op %d (%s) attribute %q: decoded %s, the dump says %s", i, op.Type, name, got, want)
			}
		}
	}
}

// Paddle's other real programs decode to the README's counts and versions.
func TestParseProgramRealPrograms(t *testing.T) {
	for _, c := range []struct {
		file          string
		vars, ops     int
		version       int64
		feed, fetched string
	}{
		{"serving-uci-housing/uci_housing_model/__model__", 7, 4, 1007000, "x", "fc_0.tmp_1"},
		{"edl-mnist-model/mnist_model/__model__", 27, 14, 1007001, "img", "fc_0.tmp_2"},
		{"paddle-lite-simple-model/model.pdmodel", 13, 5, 2002002, "image", "batch_norm_0.tmp_3"},
		{"paddlerec-pdmodel/pruned_inference.pdmodel", 1259, 838, 0, "embedding_0.tmp_0", "save_infer_model/scale_0.tmp_0"},
	} {
		t.Run(c.file, func(t *testing.T) {
			p := parseFixture(t, c.file)
			var vars, ops int
			feeds, fetches := map[string]bool{}, map[string]bool{}
			for _, b := range p.Blocks {
				vars, ops = vars+len(b.Vars), ops+len(b.Ops)
				for _, op := range b.Ops {
					switch op.Type {
					case "feed":
						feeds[op.Outputs["Out"][0]] = true
					case "fetch":
						fetches[op.Inputs["X"][0]] = true
					}
				}
			}
			if vars != c.vars || ops != c.ops || p.Version != c.version {
				t.Errorf("%d vars, %d ops, version %d; want %d, %d, %d", vars, ops, p.Version, c.vars, c.ops, c.version)
			}
			if !feeds[c.feed] || !fetches[c.fetched] {
				t.Errorf("%d feeds and fetches %v, want %s among the feeds and %s fetched", len(feeds), slices.Sorted(maps.Keys(fetches)), c.feed, c.fetched)
			}
		})
	}
}

// Attributes decode from every wire form: repeated numbers unpacked (as
// Paddle writes them) and packed, negative ints, longs.
func TestParseProgramAttributeForms(t *testing.T) {
	packed := func(vs ...uint64) []byte {
		var b []byte
		for _, v := range vs {
			b = protowire.AppendVarint(b, v)
		}
		return b
	}
	neg := func(v int64) uint64 { return uint64(v) }
	attrs := [][]byte{
		msg(str(1, "i"), num(2, 0), num(3, neg(-7))),
		msg(str(1, "f"), num(2, 1), fixed32(4, math.Float32bits(0.5))),
		msg(str(1, "ints"), num(2, 3), num(6, 1), num(6, neg(-2)), bytesField(6, packed(3, neg(-4)))),
		msg(str(1, "floats"), num(2, 4), fixed32(7, math.Float32bits(1.5)), bytesField(7, []byte{0, 0, 0x80, 0x3f})),
		msg(str(1, "strings"), num(2, 5), str(8, "a"), str(8, "")),
		msg(str(1, "bools"), num(2, 7), num(11, 1), bytesField(11, packed(0, 1))),
		msg(str(1, "long"), num(2, 9), num(13, neg(-1<<40))),
		msg(str(1, "longs"), num(2, 11), bytesField(15, packed(neg(-1), 1<<40))),
		msg(str(1, "block"), num(2, 8), num(12, 2)),
	}
	op := msg(append([][]byte{bytesField(1, msg(str(1, "X"), str(2, "a"), str(2, "b"))), bytesField(1, msg(str(1, "X"), str(2, "c"))), str(3, "any")}, fieldsOf(4, attrs)...)...)
	p, err := ParseProgram(program(block(nil, [][]byte{op})))
	if err != nil {
		t.Fatal(err)
	}
	got := p.Blocks[0].Ops[0]
	if !slices.Equal(got.Inputs["X"], []string{"a", "b", "c"}) {
		t.Errorf("X bound to %v, want a parameter named twice to append: [a b c]", got.Inputs["X"])
	}
	a := got.Attrs
	for _, c := range []struct {
		name string
		got  any
		want any
	}{
		{"i", a["i"].Int, int32(-7)},
		{"f", a["f"].Float, float32(0.5)},
		{"ints", a["ints"].Ints, []int32{1, -2, 3, -4}},
		{"floats", a["floats"].Floats, []float32{1.5, 1}},
		{"strings", a["strings"].Strings, []string{"a", ""}},
		{"bools", a["bools"].Bools, []bool{true, false, true}},
		{"long", a["long"].Long, int64(-1 << 40)},
		{"longs", a["longs"].Longs, []int64{-1, 1 << 40}},
		{"block", a["block"].Block, int32(2)},
		{"block type", a["block"].Type, AttrBlock},
	} {
		if fmt.Sprint(c.got) != fmt.Sprint(c.want) {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
}

// What Paddle could not have written, or what would make a small input
// decode to a huge program, is refused with an error that says what.
func TestParseProgramRefuses(t *testing.T) {
	tensorVar := func(lod uint64, dims ...int64) []byte {
		td := [][]byte{num(1, 5)}
		for _, d := range dims {
			td = append(td, num(2, uint64(d)))
		}
		lt := msg(bytesField(1, msg(td...)), num(2, lod))
		return msg(str(1, "v"), bytesField(2, msg(num(1, 7), bytesField(3, lt))))
	}
	real := cubetest.ReadPaddleData(t, "serving-uci-housing/uci_housing_model/__model__")
	manyArgs := make([][]byte, MaxProgramItems+1)
	for i := range manyArgs {
		manyArgs[i] = str(2, "a")
	}
	for _, c := range []struct {
		name, want string
		b          []byte
	}{
		{"a dimension below -1", `"v": TensorDesc: dims [3 -2]`, program(block([][]byte{tensorVar(0, 3, -2)}, nil))},
		{"17 dimensions", "more than 16 dims", program(block([][]byte{tensorVar(0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1)}, nil))},
		{"a LoD level of 9", "lod_level 9: want 0-8", program(block([][]byte{tensorVar(9, -1, 10)}, nil))},
		{"a negative LoD level", "lod_level -1", program(block([][]byte{tensorVar(uint64(1<<64-1), -1, 10)}, nil))},
		{"a variable without a type", "name and type are required", program(block([][]byte{msg(str(1, "v"))}, nil))},
		{"an op without a type", "block 0 op 0: OpDesc: no type", program(block(nil, [][]byte{msg(bytesField(1, msg(str(1, "X"))))}))},
		{"an attribute without a type", `relu: OpDesc.Attr "axis": name and type are required`, program(block(nil, [][]byte{msg(str(3, "relu"), bytesField(4, msg(str(1, "axis"))))}))},
		{"packed floats of 3 bytes", "packed floats: 3 bytes", program(block(nil, [][]byte{msg(str(3, "relu"), bytesField(4, msg(str(1, "f"), num(2, 4), bytesField(7, []byte{1, 2, 3}))))}))},
		{"a truncated program", "unexpected EOF", real[:len(real)-3]},
		{"more items than MaxProgramItems", "more than 1048576 blocks, variables, ops, arguments and attributes", program(block(nil, [][]byte{msg(str(3, "concat"), bytesField(1, msg(append([][]byte{str(1, "X")}, manyArgs...)...)))}))},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseProgram(c.b)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
}

// Protobuf builders for hand-made programs.

func msg(fields ...[]byte) []byte { return bytes.Join(fields, nil) }

func num(n protowire.Number, v uint64) []byte {
	return protowire.AppendVarint(protowire.AppendTag(nil, n, protowire.VarintType), v)
}

func fixed32(n protowire.Number, v uint32) []byte {
	return protowire.AppendFixed32(protowire.AppendTag(nil, n, protowire.Fixed32Type), v)
}

func bytesField(n protowire.Number, p []byte) []byte {
	return protowire.AppendBytes(protowire.AppendTag(nil, n, protowire.BytesType), p)
}

func str(n protowire.Number, s string) []byte { return bytesField(n, []byte(s)) }

func fieldsOf(n protowire.Number, ms [][]byte) [][]byte {
	out := make([][]byte, len(ms))
	for i, m := range ms {
		out[i] = bytesField(n, m)
	}
	return out
}

func block(vars, ops [][]byte) []byte {
	return msg(append(append([][]byte{num(1, 0), num(2, uint64(1<<64-1))}, fieldsOf(3, vars)...), fieldsOf(4, ops)...)...)
}

func program(blocks ...[]byte) []byte { return msg(fieldsOf(1, blocks)...) }

// textNode is a message of protobuf text format, as Paddle's
// __model__.prototxt dumps are written: scalar fields as written (strings
// still quoted), and sub-messages, each by name in order.
type textNode struct {
	fields map[string][]string
	kids   map[string][]*textNode
}

func (n *textNode) one(key string) string {
	if n == nil || len(n.fields[key]) == 0 {
		return ""
	}
	return n.fields[key][0]
}

func (n *textNode) kid(key string) *textNode {
	if n == nil || len(n.kids[key]) == 0 {
		return nil
	}
	return n.kids[key][0]
}

// parseTextProto reads the one-field-per-line text format of the dumps.
func parseTextProto(f *os.File) (*textNode, error) {
	newNode := func() *textNode { return &textNode{fields: map[string][]string{}, kids: map[string][]*textNode{}} }
	stack := []*textNode{newNode()}
	s := bufio.NewScanner(f)
	s.Buffer(nil, 1<<20)
	for line := 1; s.Scan(); line++ {
		l := strings.TrimSpace(s.Text())
		top := stack[len(stack)-1]
		switch {
		case l == "":
		case l == "}":
			if len(stack) == 1 {
				return nil, fmt.Errorf("line %d: } without {", line)
			}
			stack = stack[:len(stack)-1]
		case strings.HasSuffix(l, " {"):
			k := newNode()
			name := strings.TrimSuffix(l, " {")
			top.kids[name] = append(top.kids[name], k)
			stack = append(stack, k)
		default:
			key, val, ok := strings.Cut(l, ": ")
			if !ok {
				return nil, fmt.Errorf("line %d: %q", line, l)
			}
			top.fields[key] = append(top.fields[key], val)
		}
	}
	return stack[0], s.Err()
}

func unquote(t *testing.T, s string) string {
	t.Helper()
	u, err := strconv.Unquote(s)
	if err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return u
}

func unquoteAll(t *testing.T, ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = unquote(t, s)
	}
	return out
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// int64s prints dims as the dump does, [] for none.
func int64s(d []int64) []string {
	out := make([]string, len(d))
	for i, v := range d {
		out[i] = strconv.FormatInt(v, 10)
	}
	return out
}

// Marshal writes what ParseProgram reads back unchanged, for every real program: a stand-in
// trainer's program is a ProgramDesc as Paddle writes it.
func TestProgramMarshalRoundTrip(t *testing.T) {
	for _, file := range []string{"serving-ctr-model/ctr_prediction/__model__", "serving-uci-housing/uci_housing_model/__model__",
		"edl-mnist-model/mnist_model/__model__", "paddle-lite-simple-model/model.pdmodel", "paddlerec-pdmodel/pruned_inference.pdmodel"} {
		p := parseFixture(t, file)
		again, err := ParseProgram(p.Marshal())
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if !reflect.DeepEqual(p, again) {
			t.Errorf("%s: the program changed through Marshal", file)
		}
	}
}
