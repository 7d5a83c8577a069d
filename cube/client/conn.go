// Package client looks keys up in cube servers: a baidu_std connection
// (Conn) and a sharded, replicated client configured by Paddle Serving's
// cube.conf (Client).
package client

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/proto"
)

// Conn is one baidu_std connection carrying one request at a time. It is not
// safe for concurrent use.
type Conn struct {
	c     net.Conn
	br    *bufio.Reader
	corr  int64
	out   []byte
	in    []byte
	frame proto.Frame
	vals  []proto.Value
	// Service is the service name sent; defaults to rec.mcube.DictService,
	// what brpc's C++ client sends.
	Service string
}

// RPCError is an error answered by the server in the response meta.
type RPCError struct {
	Code int32
	Text string
}

func (e *RPCError) Error() string { return fmt.Sprintf("rpc error %d: %s", e.Code, e.Text) }

// Dial connects to a cube server.
func Dial(addr string, timeout time.Duration) (*Conn, error) {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	return &Conn{c: c, br: bufio.NewReaderSize(c, 64<<10), Service: proto.DictServiceFull}, nil
}

// Close closes the connection.
func (c *Conn) Close() error { return c.c.Close() }

// RemoteAddr is the server's address.
func (c *Conn) RemoteAddr() string { return c.c.RemoteAddr().String() }

// Seek sends one DictRequest and waits for its response. The returned
// values alias the connection's buffer until the next call. A zero deadline
// means none.
func (c *Conn) Seek(keys []uint64, versionRequired bool, deadline time.Time) ([]proto.Value, string, error) {
	if err := c.c.SetDeadline(deadline); err != nil {
		return nil, "", err
	}
	c.corr++
	meta := proto.RpcMeta{HasRequest: true, Service: []byte(c.Service), Method: []byte(proto.SeekMethod), CorrelationID: c.corr}
	out, start, ms := proto.BeginFrame(c.out[:0], &meta)
	out = proto.AppendDictRequest(out, keys, versionRequired)
	c.out = proto.FinishFrame(out, start, ms)
	if _, err := c.c.Write(c.out); err != nil {
		return nil, "", err
	}
	var err error
	if c.in, err = proto.ReadFrame(c.br, c.in, 1<<30, &c.frame); err != nil {
		return nil, "", err
	}
	if c.frame.Meta.CorrelationID != c.corr {
		return nil, "", fmt.Errorf("correlation_id %d, want %d", c.frame.Meta.CorrelationID, c.corr)
	}
	if c.frame.Meta.ErrorCode != 0 {
		return nil, "", &RPCError{Code: c.frame.Meta.ErrorCode, Text: string(c.frame.Meta.ErrorText)}
	}
	var version string
	c.vals, version, err = proto.DecodeDictResponse(c.frame.Payload, c.vals[:0])
	if err != nil {
		return nil, "", err
	}
	if len(c.vals) != len(keys) {
		return nil, "", errors.New("response holds a different number of values than keys sent")
	}
	return c.vals, version, nil
}
