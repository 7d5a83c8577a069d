package predict

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	gproto "google.golang.org/protobuf/proto"

	"github.com/elasticctr/terraform-provider-ctr/cube/paddle/servingpb"
	"github.com/elasticctr/terraform-provider-ctr/cube/proto"
	"github.com/elasticctr/terraform-provider-ctr/cube/servingconf"
	"github.com/elasticctr/terraform-provider-ctr/internal/cubetest"
)

// kvConf is the criteo CTR kv model's feeds (§4.5): dense_input, then one LoD feed per slot.
func kvConf(slots int) *servingpb.GeneralModelConfig {
	c := &servingpb.GeneralModelConfig{FeedVar: []*servingpb.FeedVar{{Name: gproto.String("dense_input"), AliasName: gproto.String("dense_input"),
		FeedType: gproto.Int32(Float32), Shape: []int32{13}}}}
	for i := range slots {
		n := "embedding_" + strconv.Itoa(i) + ".tmp_0"
		c.FeedVar = append(c.FeedVar, &servingpb.FeedVar{Name: gproto.String(n), AliasName: gproto.String(n), IsLodTensor: gproto.Bool(true),
			FeedType: gproto.Int32(Float32), Shape: []int32{-1}})
	}
	return c
}

// TestRequest_FeedsInTheModelsOrder: tensor i is feed i; a LoD feed carries its slot's keys as
// int64 with shape [n] and LoD [0, n]; the dense feed its 13 floats with shape [1, 13].
func TestRequest_FeedsInTheModelsOrder(t *testing.T) {
	dense := make([]float32, 13)
	req, err := Request(kvConf(2), [][]uint64{{7, 9}, {0}}, dense, "prob")
	if err != nil {
		t.Fatal(err)
	}
	ts := req.GetTensor()
	if len(ts) != 3 || ts[0].GetName() != "dense_input" || ts[0].GetElemType() != Float32 || len(ts[0].GetFloatData()) != 13 {
		t.Fatalf("dense: %v", ts)
	}
	k := ts[1]
	if k.GetElemType() != Int64 || !slices.Equal(k.GetInt64Data(), []int64{7, 9}) || !slices.Equal(k.GetShape(), []int32{2}) || !slices.Equal(k.GetLod(), []int32{0, 2}) {
		t.Errorf("slot 0: %v", k)
	}
	if _, err := Request(kvConf(2), [][]uint64{{1}}, dense); err == nil || !strings.Contains(err.Error(), "slots") {
		t.Errorf("too few slots: %v", err)
	}
	if _, err := Request(kvConf(1), [][]uint64{{1}}, dense[:3]); err == nil || !strings.Contains(err.Error(), "13 dense") {
		t.Errorf("too few dense values: %v", err)
	}
	// A real model configuration: uci_housing's one float feed of 13.
	m, err := servingconf.ReadModelConf(cubetest.PaddleData(t, filepath.Join("serving-uci-housing", "uci_housing_model")))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Request(m, nil, dense); err != nil {
		t.Errorf("uci_housing: %v", err)
	}
}

var softmax = &servingpb.Response{Outputs: []*servingpb.ModelOutput{{EngineName: gproto.String("GeneralDistKVInferOp_0"),
	Tensor: []*servingpb.Tensor{{Name: gproto.String("prob"), AliasName: gproto.String("prob"), ElemType: gproto.Int32(Float32),
		Shape: []int32{1, 2}, FloatData: []float32{0.75, 0.25}}}}}}

// TestPredict_BaiduStdGunzipsTheResponse: the client sends the service's full name and
// inference, and reads a response the server gzipped (compress_type 2), as every baidu_std
// response of Serving's is.
func TestPredict_BaiduStdGunzipsTheResponse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan proto.RpcMeta, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		var f proto.Frame
		if _, err := proto.ReadFrame(bufio.NewReader(c), nil, 1<<20, &f); err != nil {
			return
		}
		m := f.Meta
		m.Service, m.Method = bytes.Clone(m.Service), bytes.Clone(m.Method)
		got <- m
		b, _ := gproto.Marshal(softmax)
		var z bytes.Buffer
		zw := gzip.NewWriter(&z)
		_, _ = zw.Write(b)
		_ = zw.Close()
		_, _ = c.Write(proto.AppendFrame(nil, &proto.RpcMeta{HasResponse: true, CorrelationID: f.Meta.CorrelationID, CompressType: compressGzip}, z.Bytes()))
	}()
	c := NewClient(ln.Addr().String(), 0)
	defer c.Close()
	resp, err := c.Predict(context.Background(), &servingpb.Request{})
	if err != nil {
		t.Fatal(err)
	}
	m := <-got
	if string(m.Service) != ServiceFull || string(m.Method) != Method {
		t.Errorf("sent %s.%s", m.Service, m.Method)
	}
	p, err := Probabilities(resp)
	if err != nil || len(p) != 1 || p[0] != 0.25 {
		t.Errorf("probabilities %v, %v", p, err)
	}
}

// TestPredict_HTTP: over HTTP a failed workflow is a 500 whose text the error carries; a
// success is the binary Response.
func TestPredict_HTTP(t *testing.T) {
	fail := true
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != HTTPPath || r.Header.Get("Content-Type") != ProtoType {
			http.NotFound(w, r)
			return
		}
		_, _ = io.ReadAll(r.Body)
		if fail {
			http.Error(w, "[E-5000]InferService inference failed!", http.StatusInternalServerError)
			return
		}
		b, _ := gproto.Marshal(softmax)
		w.Header().Set("Content-Type", ProtoType)
		_, _ = w.Write(b)
	}))
	defer srv.Close()
	c := NewClient(srv.URL, 0)
	if _, err := c.Predict(context.Background(), &servingpb.Request{}); err == nil || !strings.Contains(err.Error(), "E-5000") {
		t.Fatalf("%v", err)
	}
	fail = false
	resp, err := c.Predict(context.Background(), &servingpb.Request{})
	if err != nil {
		t.Fatal(err)
	}
	if p, err := Probabilities(resp); err != nil || p[0] != 0.25 {
		t.Errorf("%v, %v", p, err)
	}
}
