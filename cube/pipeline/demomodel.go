package pipeline

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/elasticctr/terraform-provider-ctr/cube/paddle"
	"github.com/elasticctr/terraform-provider-ctr/cube/paddle/servingpb"
	"github.com/elasticctr/terraform-provider-ctr/cube/servingconf"
)

// DemoModel is the shape of the small CTR network WriteDemoModel saves: Slots embedding
// slots of Width floats, sum-pooled, concatenated, one hidden layer of Hidden with relu,
// and a softmax over [no click, click] (the fetch DemoFetch, alias DemoAlias).
type DemoModel struct {
	Slots, Width, Hidden int
}

// DemoModelOf is the demo's network over embeddings of width floats: 3 slots, a hidden
// layer of 16.
func DemoModelOf(width int) DemoModel { return DemoModel{Slots: 3, Width: width, Hidden: 16} }

// The demo model's fetch var and its alias.
const (
	DemoFetch = "prob"
	DemoAlias = "prob"
)

// WriteDemoModel saves a serving model folder at dir as Paddle's save_inference_model and
// Serving's save_model write it for the cube (the embedding lookups cut out): __model__
// (a ProgramDesc), one LoDTensor file per parameter, and serving_server_conf.prototxt with
// one LoD feed per slot. Its weights are fixed small numbers: the demo's network is not
// trained, but it is a real Fluid program that the serving stand-in runs on the cube's
// embeddings.
func WriteDemoModel(dir string, m DemoModel) error {
	if m.Slots < 1 || m.Width < 1 || m.Hidden < 1 {
		return fmt.Errorf("demo model %+v: every size must be at least 1", m)
	}
	lod := func(name string, dims ...int64) paddle.Var {
		return paddle.Var{Name: name, Type: 7, DataType: paddle.FP32, Dims: dims, LoDLevel: 1}
	}
	tensor := func(name string, dims ...int64) paddle.Var {
		return paddle.Var{Name: name, Type: 7, DataType: paddle.FP32, Dims: dims}
	}
	param := func(name string, dims ...int64) paddle.Var {
		v := tensor(name, dims...)
		v.Persistable = true
		return v
	}
	io := func(k, v string) map[string][]string { return map[string][]string{k: {v}} }
	intAttr := func(name string, x int32) map[string]paddle.Attr {
		return map[string]paddle.Attr{name: {Type: paddle.AttrInt, Int: x}}
	}
	width, in := int64(m.Width), int64(m.Slots*m.Width)
	b := paddle.Block{Idx: 0, ParentIdx: -1, Vars: []paddle.Var{{Name: "feed", Type: 9, Persistable: true}, {Name: "fetch", Type: 10, Persistable: true}}}
	var pooled []string
	conf := &servingpb.GeneralModelConfig{}
	for i := range m.Slots {
		feed, pool := "embedding_"+strconv.Itoa(i)+".tmp_0", "sequence_pool_"+strconv.Itoa(i)+".tmp_0"
		b.Vars = append(b.Vars, lod(feed, -1, width), tensor(pool, -1, width))
		b.Ops = append(b.Ops, paddle.Op{Type: "feed", Inputs: io("X", "feed"), Outputs: io("Out", feed), Attrs: intAttr("col", int32(i))})
		b.Ops = append(b.Ops, paddle.Op{Type: "sequence_pool", Inputs: io("X", feed), Outputs: io("Out", pool),
			Attrs: map[string]paddle.Attr{"pooltype": {Type: paddle.AttrString, String: "SUM"}}})
		pooled = append(pooled, pool)
		conf.FeedVar = append(conf.FeedVar, &servingpb.FeedVar{Name: proto.String(feed), AliasName: proto.String(feed), IsLodTensor: proto.Bool(true),
			FeedType: proto.Int32(1), Shape: []int32{-1}})
	}
	h := int64(m.Hidden)
	b.Vars = append(b.Vars, tensor("concat_0.tmp_0", -1, in), param("fc_0.w_0", in, h), param("fc_0.b_0", h), tensor("fc_0.tmp_0", -1, h),
		tensor("fc_0.tmp_1", -1, h), tensor("fc_0.tmp_2", -1, h), param("fc_1.w_0", h, 2), param("fc_1.b_0", 2), tensor("fc_1.tmp_0", -1, 2),
		tensor("fc_1.tmp_1", -1, 2), tensor(DemoFetch, -1, 2))
	mul := map[string]paddle.Attr{"x_num_col_dims": {Type: paddle.AttrInt, Int: 1}, "y_num_col_dims": {Type: paddle.AttrInt, Int: 1}}
	b.Ops = append(b.Ops,
		paddle.Op{Type: "concat", Inputs: map[string][]string{"X": pooled}, Outputs: io("Out", "concat_0.tmp_0"), Attrs: intAttr("axis", 1)},
		paddle.Op{Type: "mul", Inputs: map[string][]string{"X": {"concat_0.tmp_0"}, "Y": {"fc_0.w_0"}}, Outputs: io("Out", "fc_0.tmp_0"), Attrs: mul},
		paddle.Op{Type: "elementwise_add", Inputs: map[string][]string{"X": {"fc_0.tmp_0"}, "Y": {"fc_0.b_0"}}, Outputs: io("Out", "fc_0.tmp_1"), Attrs: intAttr("axis", 1)},
		paddle.Op{Type: "relu", Inputs: io("X", "fc_0.tmp_1"), Outputs: io("Out", "fc_0.tmp_2")},
		paddle.Op{Type: "mul", Inputs: map[string][]string{"X": {"fc_0.tmp_2"}, "Y": {"fc_1.w_0"}}, Outputs: io("Out", "fc_1.tmp_0"), Attrs: mul},
		paddle.Op{Type: "elementwise_add", Inputs: map[string][]string{"X": {"fc_1.tmp_0"}, "Y": {"fc_1.b_0"}}, Outputs: io("Out", "fc_1.tmp_1"), Attrs: intAttr("axis", 1)},
		paddle.Op{Type: "softmax", Inputs: io("X", "fc_1.tmp_1"), Outputs: io("Out", DemoFetch), Attrs: intAttr("axis", -1)},
		paddle.Op{Type: "fetch", Inputs: io("X", DemoFetch), Outputs: io("Out", "fetch"), Attrs: intAttr("col", 0)})
	conf.FetchVar = []*servingpb.FetchVar{{Name: proto.String(DemoFetch), AliasName: proto.String(DemoAlias), IsLodTensor: proto.Bool(false),
		FetchType: proto.Int32(1), Shape: []int32{2}}}

	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	prog := &paddle.Program{Blocks: []paddle.Block{b}}
	if err := os.WriteFile(filepath.Join(dir, "__model__"), prog.Marshal(), 0o644); err != nil {
		return err
	}
	// Fixed weights: a hidden layer that mixes every input, and an output layer whose click
	// side grows with the hidden units (so that embeddings move the probability).
	weight := func(i, j int64) float32 { return float32(((i*31+j*17)%13)-6) / 13 }
	for _, p := range []struct {
		name string
		dims []int64
		at   func(i, j int64) float32
	}{
		{"fc_0.w_0", []int64{in, h}, weight},
		{"fc_0.b_0", []int64{h}, func(_, j int64) float32 { return 0.01 * float32(j%3) }},
		{"fc_1.w_0", []int64{h, 2}, func(i, j int64) float32 { return float32(j*2-1) * 0.3 * float32(1+i%2) }},
		{"fc_1.b_0", []int64{2}, func(_, j int64) float32 { return float32(1-2*j) * 0.5 }},
	} {
		rows, cols := int64(1), p.dims[len(p.dims)-1]
		if len(p.dims) == 2 {
			rows = p.dims[0]
		}
		data := paddle.AppendLoDTensorHeader(nil, paddle.FP32, p.dims, nil)
		for i := range rows {
			for j := range cols {
				data = binary.LittleEndian.AppendUint32(data, math.Float32bits(p.at(i, j)))
			}
		}
		if err := os.WriteFile(filepath.Join(dir, p.name), data, 0o644); err != nil {
			return err
		}
	}
	text, err := prototext.MarshalOptions{Multiline: true}.Marshal(conf)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, servingconf.ModelConfFile), text, 0o644)
}
