package servingstandin

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	gproto "google.golang.org/protobuf/proto"

	"github.com/elasticctr/terraform-provider-ctr/cube/bounded"
	"github.com/elasticctr/terraform-provider-ctr/cube/paddle/servingpb"
	"github.com/elasticctr/terraform-provider-ctr/cube/portmux"
	"github.com/elasticctr/terraform-provider-ctr/cube/proto"
)

// The service as brpc registers it (§4.2): the full name, and the short one brpc accepts too.
const (
	serviceFull  = "baidu.paddle_serving.predictor.general_model.GeneralModelService"
	serviceShort = "GeneralModelService"
	compressNone = 0
	compressGzip = 2
	// failedCode and failedText are what a failed workflow answers (§4.2, Errors).
	failedCode = -5000
	failedText = "InferService inference failed!"
	// gzipAtLeast is the smallest HTTP reply brpc gzips when the client accepts it.
	gzipAtLeast = 512
)

// transport answers GeneralModelService over baidu_std and HTTP on one port, as brpc does.
type transport struct {
	e       *engine
	maxBody int
	logf    func(string, ...any)
	http    *http.Server
	httpLn  *portmux.Listener
}

func newTransport(e *engine, maxBody int, logf func(string, ...any)) *transport {
	t := &transport{e: e, maxBody: maxBody, logf: logf, httpLn: portmux.NewListener()}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "OK") })
	for _, name := range []string{serviceShort, serviceFull} {
		mux.HandleFunc("POST /"+name+"/inference", t.serveHTTP)
		mux.HandleFunc("POST /"+name+"/debug", t.serveHTTP)
	}
	t.http = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, WriteTimeout: time.Minute}
	return t
}

// serve accepts on ln until ctx ends.
func (t *transport) serve(ctx context.Context, ln net.Listener) error {
	go func() { _ = t.http.Serve(t.httpLn) }()
	go func() {
		<-ctx.Done()
		ln.Close()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = t.http.Shutdown(sctx)
		t.httpLn.Close()
	}()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		go t.conn(ctx, c)
	}
}

func (t *transport) conn(ctx context.Context, c net.Conn) {
	br := bufio.NewReaderSize(c, 64<<10)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	head, err := br.Peek(4)
	if err != nil {
		c.Close()
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	if string(head) != proto.Magic {
		t.httpLn.Push(&portmux.Conn{Conn: c, R: br})
		return
	}
	defer c.Close()
	var (
		f   proto.Frame
		buf []byte
	)
	for {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Minute))
		if buf, err = proto.ReadFrame(br, buf, t.maxBody, &f); err != nil {
			return
		}
		out := t.rpc(ctx, &f)
		_ = c.SetWriteDeadline(time.Now().Add(time.Minute))
		if _, err := c.Write(out); err != nil {
			return
		}
	}
}

// rpc answers one baidu_std frame: errors in the meta, and every response gzipped, as the
// generated service sets it (§4.2).
func (t *transport) rpc(ctx context.Context, f *proto.Frame) []byte {
	m := &f.Meta
	reply := proto.RpcMeta{HasResponse: true, CorrelationID: m.CorrelationID}
	fail := func(code int32, text string) []byte {
		reply.ErrorCode, reply.ErrorText = code, []byte(text)
		return proto.AppendFrame(nil, &reply, nil)
	}
	switch svc := string(m.Service); {
	case !m.HasRequest:
		return fail(proto.EREQUEST, "not a request")
	case svc != serviceFull && svc != serviceShort:
		return fail(proto.ENOSERVICE, "Fail to find service="+svc)
	case string(m.Method) != "inference" && string(m.Method) != "debug":
		return fail(proto.ENOMETHOD, "Fail to find method="+string(m.Method))
	}
	body := f.Payload
	switch m.CompressType {
	case compressNone:
	case compressGzip:
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			return fail(proto.EREQUEST, "Fail to decompress request: "+err.Error())
		}
		if body, err = bounded.ReadAll(zr, int64(t.maxBody)); err != nil {
			return fail(proto.EREQUEST, "Fail to decompress request: "+err.Error())
		}
	default:
		return fail(proto.EREQUEST, "unknown compress_type "+strconv.Itoa(int(m.CompressType)))
	}
	var req servingpb.Request
	if err := gproto.Unmarshal(body, &req); err != nil {
		return fail(proto.EREQUEST, "Fail to parse request message: "+err.Error())
	}
	resp, err := t.e.predict(ctx, &req)
	if err != nil {
		t.logf("inference failed: %v", err)
		return fail(failedCode, failedText)
	}
	payload, err := gproto.Marshal(resp)
	if err != nil {
		return fail(proto.EINTERNAL, err.Error())
	}
	var zb bytes.Buffer
	zw := gzip.NewWriter(&zb)
	_, _ = zw.Write(payload)
	_ = zw.Close()
	reply.CompressType = compressGzip
	return proto.AppendFrame(nil, &reply, zb.Bytes())
}

// serveHTTP is brpc's HTTP access to the service: a binary Request for application/proto or
// application/x-protobuf, JSON for anything else (even no Content-Type); the reply in the
// same format, gzipped only when the client accepts it and it is at least 512 bytes.
func (t *transport) serveHTTP(w http.ResponseWriter, r *http.Request) {
	ct := r.Header.Get("Content-Type")
	binary := strings.HasPrefix(ct, "application/proto") || strings.HasPrefix(ct, "application/x-protobuf")
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, "bad gzip body: "+err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	b, err := bounded.ReadAll(body, int64(t.maxBody))
	if err != nil {
		http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
		return
	}
	var req servingpb.Request
	if binary {
		err = gproto.Unmarshal(b, &req)
	} else {
		err = protojson.Unmarshal(b, &req)
	}
	if err != nil {
		http.Error(w, "Fail to parse request: "+err.Error(), http.StatusBadRequest)
		return
	}
	resp, err := t.e.predict(r.Context(), &req)
	if err != nil {
		t.logf("inference failed: %v", err)
		w.Header().Set("x-bd-error-code", strconv.Itoa(failedCode))
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, "[E"+strconv.Itoa(failedCode)+"]"+failedText)
		return
	}
	var out []byte
	if binary {
		out, err = gproto.Marshal(resp)
	} else {
		out, err = protojson.MarshalOptions{UseProtoNames: true}.Marshal(resp)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if ct == "" {
		ct = "application/json"
	}
	w.Header().Set("Content-Type", ct)
	if len(out) >= gzipAtLeast && strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
		var zb bytes.Buffer
		zw := gzip.NewWriter(&zb)
		_, _ = zw.Write(out)
		_ = zw.Close()
		w.Header().Set("Content-Encoding", "gzip")
		out = zb.Bytes()
	}
	_, _ = w.Write(out)
}
