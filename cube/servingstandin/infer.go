package servingstandin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync/atomic"
	"time"

	gproto "google.golang.org/protobuf/proto"

	"github.com/elasticctr/terraform-provider-ctr/cube/client"
	"github.com/elasticctr/terraform-provider-ctr/cube/paddle"
	"github.com/elasticctr/terraform-provider-ctr/cube/paddle/infer"
	"github.com/elasticctr/terraform-provider-ctr/cube/paddle/servingpb"
)

// EngineName is outputs[0].engine_name of every response: the op that ran the model (§4.5).
const EngineName = "GeneralDistKVInferOp_0"

// maxKeys bounds the cube keys of one request (Paddle's op has no bound; the stand-in keeps
// its memory to a few hundred MB whatever a request says).
const maxKeys = 1 << 20

// Element types the stand-in takes (§4.1): int64 cube keys and float dense inputs.
const (
	elemInt64   = 0
	elemFloat32 = 1
)

// errNoModel is every request's answer while the engine has no model: Paddle builds its
// predictors in a worker start hook whose failure it ignores, so the server listens and each
// request fails (§1.7).
var errNoModel = errors.New("Failed get thread specific data") //nolint:staticcheck // Paddle's own words

// loaded is one load of the engine's model_dir.
type loaded struct {
	model *infer.Model
	err   error
	stamp time.Time // the reloadable_meta's mtime when it was loaded
}

// engine is GeneralReaderOp → GeneralDistKVInferOp → GeneralResponseOp over one model, which
// it reloads when the model's timestamp file changes (§3).
type engine struct {
	desc *servingpb.EngineDesc
	conf *servingpb.GeneralModelConfig
	cube *client.Client // the first table of cube.conf (§4.4); nil without cube.conf
	cur  atomic.Pointer[loaded]
	logf func(string, ...any)
}

func newEngine(desc *servingpb.EngineDesc, conf *servingpb.GeneralModelConfig, cube *client.Client, logf func(string, ...any)) *engine {
	e := &engine{desc: desc, conf: conf, cube: cube, logf: logf}
	stamp, _ := e.stamp()
	e.cur.Store(e.load(stamp))
	return e
}

func (e *engine) stamp() (time.Time, error) {
	fi, err := os.Stat(e.desc.GetReloadableMeta())
	if err != nil {
		return time.Time{}, err
	}
	return fi.ModTime(), nil
}

func (e *engine) load(stamp time.Time) *loaded {
	m, err := infer.Load(e.desc.GetModelDir())
	if err != nil {
		e.logf("Failed load model_data_path in %s: %v", e.desc.GetModelDir(), err)
	}
	return &loaded{model: m, err: err, stamp: stamp}
}

// reloadLoop checks the timestamp every interval, as Resource::reload does, until ctx ends.
func (e *engine) reloadLoop(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		e.logf("Begin reload framework...")
		stamp, err := e.stamp()
		if err != nil {
			e.logf("Failed stat config file: %s", e.desc.GetReloadableMeta())
			continue
		}
		if changed(e.desc.GetReloadableType(), e.cur.Load().stamp, stamp) {
			next := e.load(stamp)
			if next.err != nil {
				e.logf("Failed reload engine model: %s", e.desc.GetName())
			}
			e.cur.Store(next)
		}
	}
}

// changed is the engine's reload rule: timestamp_ne on any change of the second-resolution
// mtime, timestamp_gt only forward; every other type never (§3).
func changed(typ string, was, now time.Time) bool {
	a, b := was.Unix(), now.Unix()
	switch typ {
	case "timestamp_ne":
		return a != b
	case "timestamp_gt":
		return b > a
	}
	return false
}

// predict answers one request as the three ops do.
func (e *engine) predict(ctx context.Context, req *servingpb.Request) (*servingpb.Response, error) {
	cur := e.cur.Load()
	if cur.err != nil {
		return nil, errNoModel
	}
	feeds := e.conf.GetFeedVar()
	inputs := map[string]infer.Input{}
	type keyTensor struct {
		name string
		keys []uint64
		lod  []int64
	}
	var keyed []keyTensor
	var all []uint64
	for i, t := range req.GetTensor() {
		n, err := count(t.GetShape())
		if err != nil {
			return nil, fmt.Errorf("tensor %d: %w", i, err)
		}
		lod, err := levelOne(t.GetLod(), n)
		if err != nil {
			return nil, fmt.Errorf("tensor %d (%s): %w", i, t.GetName(), err)
		}
		switch t.GetElemType() {
		case elemInt64:
			// The op names its output after feed_var[i] and reads shape-product keys and
			// lod[0]; past either end it reads memory that is not the request's.
			if i >= len(feeds) {
				return nil, fmt.Errorf("tensor %d holds keys, but the model has %d feeds: the op names its output feed_var[%d]", i, len(feeds), i)
			}
			if n != len(t.GetInt64Data()) {
				return nil, fmt.Errorf("tensor %d: shape %v asks for %d keys, int64_data has %d", i, t.GetShape(), n, len(t.GetInt64Data()))
			}
			if lod == nil {
				return nil, fmt.Errorf("tensor %d: keys without lod (the op reads lod[0]; send [0, %d])", i, n)
			}
			if len(all)+n > maxKeys {
				return nil, fmt.Errorf("more than %d keys in one request", maxKeys)
			}
			kt := keyTensor{name: feeds[i].GetName(), lod: lod}
			for _, k := range t.GetInt64Data() {
				kt.keys = append(kt.keys, uint64(k))
			}
			all = append(all, kt.keys...)
			keyed = append(keyed, kt)
		case elemFloat32:
			if n != len(t.GetFloatData()) {
				return nil, fmt.Errorf("tensor %d (%s): shape %v asks for %d values, float_data has %d", i, t.GetName(), t.GetShape(), n, len(t.GetFloatData()))
			}
			dims := make([]int64, len(t.GetShape()))
			for j, d := range t.GetShape() {
				dims[j] = int64(d)
			}
			// A dense tensor reaches the model under the request's name (§4.4).
			inputs[t.GetName()] = infer.Input{Data: t.GetFloatData(), Dims: dims, LoD: lod}
		default:
			return nil, fmt.Errorf("tensor %d (%s): elem_type %d; the stand-in takes int64 keys (0) and float (1)", i, t.GetName(), t.GetElemType())
		}
	}
	if len(keyed) > 0 {
		if e.cube == nil {
			return nil, errors.New("int64 tensors are cube keys, and the server has no cube.conf")
		}
		rows, width, err := e.seek(ctx, all)
		if err != nil {
			return nil, err
		}
		for _, kt := range keyed {
			data := make([]float32, 0, len(kt.keys)*width)
			for _, k := range kt.keys {
				data = append(data, rows[k]...)
			}
			inputs[kt.name] = infer.Input{Data: data, Dims: []int64{int64(len(kt.keys)), int64(width)}, LoD: kt.lod}
		}
	}
	out, err := cur.model.Run(inputs)
	if err != nil {
		return nil, err
	}
	return e.response(req, out)
}

// seek looks the unique keys up in the first table and returns each key's row, zeros for a
// missed key. The embedding width is the first unique key's value size / 4: if that key is
// missing, Paddle's op copies every row into zero-width buffers, so the stand-in refuses.
func (e *engine) seek(ctx context.Context, keys []uint64) (map[uint64][]float32, int, error) {
	uniq := make([]uint64, 0, len(keys))
	seen := make(map[uint64]bool, len(keys))
	for _, k := range keys {
		if !seen[k] {
			seen[k] = true
			uniq = append(uniq, k)
		}
	}
	res, _, err := e.cube.Seek(ctx, uniq)
	if err != nil && !errors.Is(err, client.ErrSomeShardsFailed) {
		return nil, 0, fmt.Errorf("cube: %w", err)
	}
	if !res[0].Found() {
		return nil, 0, fmt.Errorf("the first key %d is not in the cube: Paddle's op would size every embedding from it (0) and corrupt memory", uniq[0])
	}
	first := res[0].Value
	if len(first) == 0 || len(first)%4 != 0 {
		return nil, 0, fmt.Errorf("key %d: a %d-byte value is not a float32 embedding", uniq[0], len(first))
	}
	width := len(first) / 4
	rows := make(map[uint64][]float32, len(uniq))
	zero := make([]float32, width)
	for i, r := range res {
		if !r.Found() {
			rows[uniq[i]] = zero
			continue
		}
		if len(r.Value) != len(first) {
			return nil, 0, fmt.Errorf("key %d: %d bytes, key %d: %d; every embedding has one width", uniq[i], len(r.Value), uniq[0], len(first))
		}
		rows[uniq[i]] = paddle.Float32s(r.Value)
	}
	return rows, width, nil
}

// response is GeneralResponseOp: one tensor per fetch alias asked for (every fetch var when
// none), an unknown alias taking fetch var 0 (§4.5).
func (e *engine) response(req *servingpb.Request, out map[string]infer.Output) (*servingpb.Response, error) {
	fetches := e.conf.GetFetchVar()
	if len(fetches) == 0 {
		return nil, errors.New("general_model.prototxt has no fetch_var")
	}
	var which []int
	if names := req.GetFetchVarNames(); len(names) > 0 {
		for _, n := range names {
			which = append(which, max(0, slices.IndexFunc(fetches, func(f *servingpb.FetchVar) bool { return f.GetAliasName() == n })))
		}
	} else {
		for i := range fetches {
			which = append(which, i)
		}
	}
	mo := &servingpb.ModelOutput{EngineName: gproto.String(EngineName)}
	for _, i := range which {
		f := fetches[i]
		o, ok := out[f.GetName()]
		if !ok {
			return nil, fmt.Errorf("fetch var %s: the model does not produce it", f.GetName())
		}
		t := &servingpb.Tensor{Name: gproto.String(f.GetName()), AliasName: gproto.String(f.GetAliasName()), ElemType: gproto.Int32(elemFloat32), FloatData: o.Data}
		for _, d := range o.Dims {
			t.Shape = append(t.Shape, int32(d))
		}
		mo.Tensor = append(mo.Tensor, t)
	}
	return &servingpb.Response{Outputs: []*servingpb.ModelOutput{mo}, LogId: req.LogId}, nil
}

// count is the number of values a shape holds.
func count(shape []int32) (int, error) {
	n := 1
	for _, d := range shape {
		if d < 0 || (d > 0 && n > maxKeys*1024/int(d)) {
			return 0, fmt.Errorf("shape %v", shape)
		}
		n *= int(d)
	}
	return n, nil
}

// levelOne checks a request's one-level lod over n rows: offsets from 0, never decreasing,
// ending at n. nil when the tensor has none.
func levelOne(lod []int32, n int) ([]int64, error) {
	if len(lod) == 0 {
		return nil, nil
	}
	out := make([]int64, len(lod))
	for i, o := range lod {
		if (i == 0 && o != 0) || (i > 0 && o < lod[i-1]) {
			return nil, fmt.Errorf("lod %v: offsets must start at 0 and never decrease", lod)
		}
		out[i] = int64(o)
	}
	if int(lod[len(lod)-1]) != n {
		return nil, fmt.Errorf("lod %v ends at %d, the tensor has %d rows", lod, lod[len(lod)-1], n)
	}
	return out, nil
}
