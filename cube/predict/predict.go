// Package predict asks Paddle Serving 0.9.0's GeneralModelService for predictions, as its
// clients do (../shared/reference/paddle-serving.md §4): over baidu_std, whose responses
// the server always gzips, or HTTP with a binary protobuf body.
package predict

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	gproto "google.golang.org/protobuf/proto"

	"github.com/elasticctr/terraform-provider-ctr/cube/bounded"
	"github.com/elasticctr/terraform-provider-ctr/cube/paddle/servingpb"
	"github.com/elasticctr/terraform-provider-ctr/cube/proto"
)

// The service as the server names it.
const (
	ServiceFull  = "baidu.paddle_serving.predictor.general_model.GeneralModelService"
	Method       = "inference"
	HTTPPath     = "/GeneralModelService/inference"
	ProtoType    = "application/proto"
	compressGzip = 2 // RpcMeta.compress_type of a gzipped body
	// MaxResponseBytes bounds a response, compressed and not (the server's own body limit).
	MaxResponseBytes = 64 << 20
)

// Element types (Tensor.elem_type, FeedVar.feed_type).
const (
	Int64   = 0
	Float32 = 1
)

// Request is the request for one sample: the model's feeds in order (request tensor i is
// feed_var[i]: §4.4), each LoD feed taking the next slot's keys as int64 cube keys with
// their LoD, each other float feed the dense values it declares; fetch names what comes
// back (every fetch var when empty).
func Request(conf *servingpb.GeneralModelConfig, keys [][]uint64, dense []float32, fetch ...string) (*servingpb.Request, error) {
	req := &servingpb.Request{FetchVarNames: fetch}
	slot := 0
	for _, f := range conf.GetFeedVar() {
		t := &servingpb.Tensor{Name: gproto.String(f.GetName()), AliasName: gproto.String(f.GetAliasName())}
		switch {
		case f.GetIsLodTensor():
			if slot >= len(keys) {
				return nil, fmt.Errorf("feed %s: the sample has %d slots, the model more LoD feeds", f.GetAliasName(), len(keys))
			}
			ks := keys[slot]
			slot++
			t.ElemType = gproto.Int32(Int64)
			t.Shape = []int32{int32(len(ks))}
			t.Lod = []int32{0, int32(len(ks))}
			for _, k := range ks {
				t.Int64Data = append(t.Int64Data, int64(k))
			}
		case f.GetFeedType() == Float32:
			n := 1
			for _, d := range f.GetShape() {
				n *= int(d)
			}
			if n != len(dense) {
				return nil, fmt.Errorf("feed %s wants %d dense values, the sample has %d", f.GetAliasName(), n, len(dense))
			}
			t.ElemType = gproto.Int32(Float32)
			t.Shape = append([]int32{1}, f.GetShape()...)
			t.FloatData = dense
		default:
			return nil, fmt.Errorf("feed %s: type %d, neither a LoD key list nor float", f.GetAliasName(), f.GetFeedType())
		}
		req.Tensor = append(req.Tensor, t)
	}
	if slot != len(keys) {
		return nil, fmt.Errorf("the sample has %d slots, the model %d LoD feeds", len(keys), slot)
	}
	return req, nil
}

// Client sends requests to one server: over baidu_std when the address is HOST:PORT, over
// HTTP when it is an http:// URL. It is safe for concurrent use (one baidu_std call at a
// time).
type Client struct {
	addr    string
	http    *http.Client
	timeout time.Duration

	mu    sync.Mutex
	conn  net.Conn
	br    *bufio.Reader
	corr  int64
	frame proto.Frame
	in    []byte
}

// NewClient is a client of addr; timeout bounds each call (0: 20 s, the Python HTTP client's).
func NewClient(addr string, timeout time.Duration) *Client {
	if timeout <= 0 {
		timeout = 20 * time.Second
	}
	return &Client{addr: addr, timeout: timeout, http: &http.Client{Timeout: timeout}}
}

// Close closes the baidu_std connection, if any.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn != nil {
		return c.conn.Close()
	}
	return nil
}

// Predict sends req and returns the response; a server error (err_no, an RPC error, an HTTP
// error status) is an error with the server's words.
func (c *Client) Predict(ctx context.Context, req *servingpb.Request) (*servingpb.Response, error) {
	body, err := gproto.Marshal(req)
	if err != nil {
		return nil, err
	}
	var resp servingpb.Response
	if strings.HasPrefix(c.addr, "http://") || strings.HasPrefix(c.addr, "https://") {
		err = c.overHTTP(ctx, body, &resp)
	} else {
		err = c.overBaiduStd(ctx, body, &resp)
	}
	if err != nil {
		return nil, err
	}
	if resp.GetErrNo() != 0 {
		return nil, fmt.Errorf("server error %d: %s", resp.GetErrNo(), resp.GetErrMsg())
	}
	return &resp, nil
}

func (c *Client) overHTTP(ctx context.Context, body []byte, resp *servingpb.Response) error {
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(c.addr, "/")+HTTPPath, bytes.NewReader(body))
	if err != nil {
		return err
	}
	hreq.Header.Set("Content-Type", ProtoType)
	hresp, err := c.http.Do(hreq)
	if err != nil {
		return err
	}
	defer hresp.Body.Close()
	b, err := bounded.ReadAll(hresp.Body, MaxResponseBytes)
	if err != nil {
		return fmt.Errorf("read the response: %w", err)
	}
	if hresp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %s: %s", hresp.Status, bytes.TrimSpace(b))
	}
	return gproto.Unmarshal(b, resp)
}

func (c *Client) overBaiduStd(ctx context.Context, body []byte, resp *servingpb.Response) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn == nil {
		d := net.Dialer{Timeout: 2 * time.Second} // Serving's client's connect timeout
		conn, err := d.DialContext(ctx, "tcp", c.addr)
		if err != nil {
			return err
		}
		c.conn, c.br = conn, bufio.NewReaderSize(conn, 64<<10)
	}
	deadline := time.Now().Add(c.timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	payload, err := c.call(body, deadline)
	if err != nil {
		c.conn.Close() // a half-read frame leaves the connection unusable
		c.conn = nil
		return err
	}
	return gproto.Unmarshal(payload, resp)
}

// call sends one frame and reads its answer; the payload is gunzipped when the meta says so.
func (c *Client) call(body []byte, deadline time.Time) ([]byte, error) {
	if err := c.conn.SetDeadline(deadline); err != nil {
		return nil, err
	}
	c.corr++
	meta := proto.RpcMeta{HasRequest: true, Service: []byte(ServiceFull), Method: []byte(Method), CorrelationID: c.corr}
	if _, err := c.conn.Write(proto.AppendFrame(nil, &meta, body)); err != nil {
		return nil, err
	}
	var err error
	if c.in, err = proto.ReadFrame(c.br, c.in, MaxResponseBytes, &c.frame); err != nil {
		return nil, err
	}
	m := &c.frame.Meta
	switch {
	case m.CorrelationID != c.corr:
		return nil, fmt.Errorf("correlation_id %d, want %d", m.CorrelationID, c.corr)
	case m.ErrorCode != 0:
		return nil, fmt.Errorf("rpc error %d: %s", m.ErrorCode, m.ErrorText)
	case m.CompressType == compressGzip:
		zr, err := gzip.NewReader(bytes.NewReader(c.frame.Payload))
		if err != nil {
			return nil, fmt.Errorf("gzipped response: %w", err)
		}
		return bounded.ReadAll(zr, MaxResponseBytes)
	case m.CompressType != 0:
		return nil, fmt.Errorf("response compress_type %d: only none (0) and gzip (2) are known", m.CompressType)
	}
	return c.frame.Payload, nil
}

// Probabilities reads the click probabilities of a response whose first fetch is a softmax
// over [no click, click]: the second value of each row.
func Probabilities(resp *servingpb.Response) ([]float32, error) {
	outs := resp.GetOutputs()
	if len(outs) == 0 || len(outs[0].GetTensor()) == 0 {
		return nil, errors.New("the response holds no tensor")
	}
	t := outs[0].GetTensor()[0]
	sh, data := t.GetShape(), t.GetFloatData()
	if len(sh) != 2 || sh[1] != 2 || int(sh[0])*2 != len(data) {
		return nil, fmt.Errorf("fetch %s: shape %v with %d values, want [rows, 2] (a softmax over no click, click)", t.GetAliasName(), sh, len(data))
	}
	out := make([]float32, sh[0])
	for i := range out {
		out[i] = data[2*i+1]
	}
	return out, nil
}
