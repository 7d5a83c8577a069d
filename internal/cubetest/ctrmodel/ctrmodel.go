// Package ctrmodel is the tests' one definition of the real CTR model they serve: its
// serving configuration, a serving model folder made from Paddle's files, and the click
// probability it answers for a sample (computed in the test's own process).
package ctrmodel

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/elasticctr/terraform-provider-ctr/cube/paddle/infer"
	"github.com/elasticctr/terraform-provider-ctr/cube/paddle/servingpb"
	"github.com/elasticctr/terraform-provider-ctr/cube/pipeline"
	"github.com/elasticctr/terraform-provider-ctr/cube/samples"
	"github.com/elasticctr/terraform-provider-ctr/cube/servingconf"
	"github.com/elasticctr/terraform-provider-ctr/internal/cubetest"
)

// The CTR model of ../shared/reference/paddle-data/serving-ctr-model: 13 dense inputs and
// 26 slots of 10-wide embeddings, looked up in the cube; it fetches a softmax over
// [no click, click].
const (
	Model = "serving-ctr-model/ctr_prediction"
	Slots = 26
	Width = 10
	Dense = 13
	Fetch = "save_infer_model/scale_0"
	Alias = "prob"
)

// ModelConf is the serving_server_conf.prototxt of that model saved for the cube, as the
// CTR-with-cube example's ctr_serving_model_kv is (paddle-serving.md §4.5): dense_input
// first, then one LoD feed per slot.
func ModelConf() *servingpb.GeneralModelConfig {
	c := &servingpb.GeneralModelConfig{FeedVar: []*servingpb.FeedVar{{Name: proto.String("dense_input"), AliasName: proto.String("dense_input"),
		IsLodTensor: proto.Bool(false), FeedType: proto.Int32(float32Type), Shape: []int32{Dense}}}}
	for i := range Slots {
		n := "embedding_" + strconv.Itoa(i) + ".tmp_0"
		c.FeedVar = append(c.FeedVar, &servingpb.FeedVar{Name: proto.String(n), AliasName: proto.String(n), IsLodTensor: proto.Bool(true),
			FeedType: proto.Int32(float32Type), Shape: []int32{-1}})
	}
	c.FetchVar = []*servingpb.FetchVar{{Name: proto.String(Fetch), AliasName: proto.String(Alias), IsLodTensor: proto.Bool(false),
		FetchType: proto.Int32(float32Type), Shape: []int32{2}}}
	return c
}

// ServingModel writes a serving model folder at dir, as a trainer publishes it: a copy of
// the real model's files (the fixture itself stays read-only) and its
// serving_server_conf.prototxt. It skips t where ../shared is absent.
func ServingModel(t testing.TB, dir string) {
	t.Helper()
	src := cubetest.PaddleData(t, Model)
	if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	b, err := prototext.MarshalOptions{Multiline: true}.Marshal(ModelConf())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, servingconf.ModelConfFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// Probability is what the CTR model m answers for s when the cube holds
// pipeline.Embedding(key, gen, Width) for every key: the click probability, computed in
// this process, for a test to compare with what a server answered.
func Probability(m *infer.Model, s samples.Sample, gen byte) (float32, error) {
	in := map[string]infer.Input{"dense_input": {Data: s.Dense, Dims: []int64{1, int64(len(s.Dense))}}}
	for i, keys := range s.Keys {
		var data []float32
		for _, k := range keys {
			data = append(data, pipeline.Embedding(k, gen, Width)...)
		}
		in["embedding_"+strconv.Itoa(i)+".tmp_0"] = infer.Input{Data: data, Dims: []int64{int64(len(keys)), Width}, LoD: []int64{0, int64(len(keys))}}
	}
	out, err := m.Run(in)
	if err != nil {
		return 0, err
	}
	return out[Fetch].Data[1], nil
}

// float32Type is the feed_type and fetch_type of float tensors (paddle-serving.md §4.1).
const float32Type = 1

// ShiftClickBias moves the click side of the model's last bias (fc_3.b_0) at dir by shift:
// another dense model of the same network, which answers other probabilities.
func ShiftClickBias(t testing.TB, dir string, shift float32) {
	t.Helper()
	p := filepath.Join(dir, "fc_3.b_0")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	last := b[len(b)-4:]
	binary.LittleEndian.PutUint32(last, math.Float32bits(math.Float32frombits(binary.LittleEndian.Uint32(last))+shift))
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
