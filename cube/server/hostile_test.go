package server

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/build"
	"github.com/elasticctr/terraform-provider-ctr/cube/client"
	"github.com/elasticctr/terraform-provider-ctr/cube/proto"
	"github.com/elasticctr/terraform-provider-ctr/cube/seqfile"
)

// publishSized builds a one-shard version of keys 0..n-1 under data whose
// values are size bytes: the key (little-endian), then gen.
func publishSized(tb testing.TB, data, version string, n, size int, gen byte) {
	tb.Helper()
	in := tb.TempDir()
	f, err := os.Create(filepath.Join(in, "part-0"))
	if err != nil {
		tb.Fatal(err)
	}
	w, _ := seqfile.NewWriter(f, [16]byte{gen})
	v := bytes.Repeat([]byte{gen}, size)
	for k := range n {
		binary.LittleEndian.PutUint64(v, uint64(k))
		if err := w.Append(uint64(k), v); err != nil {
			tb.Fatal(err)
		}
	}
	w.Close()
	f.Close()
	if _, err := build.Build(build.Options{Input: in, Output: data, Shards: 1, Dict: "d", Version: version}); err != nil {
		tb.Fatal(err)
	}
}

// metric sums the samples of name whose labels contain every one of labels
// (`reason="idle"`), or returns -1 if there is none.
func metric(tb testing.TB, addr, name string, labels ...string) float64 {
	tb.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	sum, found := 0.0, false
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(line, l)
		}
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			tb.Fatalf("metric line %q: %v", line, err)
		}
		sum, found = sum+v, true
	}
	if !found {
		return -1
	}
	return sum
}

// waitMetric polls until metric(...) >= want or the deadline passes.
func waitMetric(tb testing.TB, addr string, want float64, within time.Duration, name string, labels ...string) {
	tb.Helper()
	var got float64
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if got = metric(tb, addr, name, labels...); got >= want {
			return
		}
	}
	tb.Fatalf("%s%v = %v after %v, want >= %v", name, labels, got, within, want)
}

// steadyClient seeks every 50 ms on one baidu_std connection until stop is
// closed and reports the first failure on the returned channel.
func steadyClient(t *testing.T, addr string, stop chan struct{}) chan error {
	done := make(chan error, 1)
	go func() {
		c, err := client.Dial(addr, time.Second)
		if err != nil {
			done <- err
			return
		}
		defer c.Close()
		for n := 0; ; n++ {
			if n > 0 {
				select {
				case <-stop:
					done <- nil
					return
				case <-time.After(50 * time.Millisecond):
				}
			}
			vals, _, err := c.Seek([]uint64{1, 2, 999999}, false, time.Now().Add(2*time.Second))
			if err != nil {
				done <- fmt.Errorf("normal client, request %d: %w", n, err)
				return
			}
			if len(vals) != 3 || binary.LittleEndian.Uint64(vals[1].Value) != 2 || vals[2].Status != proto.StatusMiss {
				done <- fmt.Errorf("normal client: wrong values %+v", vals)
				return
			}
		}
	}()
	return done
}

// TestSlowPeersAreClosed opens every kind of connection that holds a slot
// without finishing a request (silent, "PRPC" only, a partial header, a
// frame one byte at a time, idle baidu_std and HTTP keep-alives, a slow HTTP
// header and body, a peer that does not read its responses) and checks that
// each is closed within its bound while a normal client is served
// throughout.
func TestSlowPeersAreClosed(t *testing.T) {
	const limit = 400 * time.Millisecond
	_, addr := serveWith(t, 2000, func(o *Options) {
		o.HeaderTimeout, o.ReadTimeout, o.WriteTimeout, o.IdleTimeout = limit, limit, limit, limit
	})
	stop := make(chan struct{})
	normal := steadyClient(t, addr, stop)

	frame := proto.AppendFrame(nil, &proto.RpcMeta{HasRequest: true, Service: []byte(proto.DictServiceFull), Method: []byte("seek"), CorrelationID: 1},
		proto.AppendDictRequest(nil, []uint64{1}, false))
	peers := []struct {
		name string
		send func(c net.Conn) // what the peer sends before it stalls
	}{
		{"silent", func(net.Conn) {}},
		{"PRPC only", func(c net.Conn) { c.Write([]byte("PRPC")) }},
		{"partial header", func(c net.Conn) { c.Write(frame[:10]) }},
		{"header then part of the body", func(c net.Conn) { c.Write(frame[:len(frame)-2]) }},
		{"one byte at a time", func(c net.Conn) {
			go func() {
				for i := range frame {
					if _, err := c.Write(frame[i : i+1]); err != nil {
						return
					}
					time.Sleep(limit / 4)
				}
			}()
		}},
		{"idle baidu_std", func(c net.Conn) { c.Write(frame) }}, // answered, then idle
		{"idle HTTP keep-alive", func(c net.Conn) { fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n") }},
		{"slow HTTP header", func(c net.Conn) { fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n") }},
		{"slow HTTP body", func(c net.Conn) {
			fmt.Fprintf(c, "POST /DictService/seek HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"keys\":[1,")
		}},
	}
	const bound = 4 * limit // the deadline, plus slack for a loaded machine
	var wg sync.WaitGroup
	for _, p := range peers {
		c := dial(t, addr)
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			p.send(c)
			// Read (and drop) whatever the server answers until it closes.
			c.SetReadDeadline(start.Add(bound + limit))
			_, err := io.Copy(io.Discard, c)
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Errorf("%s: connection still open after %v", p.name, time.Since(start).Round(time.Millisecond))
			} else {
				t.Logf("%s: closed after %v", p.name, time.Since(start).Round(time.Millisecond))
			}
		}()
	}
	wg.Wait()
	close(stop)
	if err := <-normal; err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get("http://" + addr + "/healthz"); err != nil {
		t.Fatal(err)
	}
	for _, reason := range []string{"silent", "idle", "slow_frame"} {
		if n := metric(t, addr, "cube_connections_closed_total", `reason="`+reason+`"`); n < 1 {
			t.Errorf("cube_connections_closed_total{reason=%q} = %v", reason, n)
		}
	}
}

// TestPeerThatDoesNotReadIsClosed pipelines requests whose responses fill
// the socket buffers and never reads them: the write deadline closes it.
func TestPeerThatDoesNotReadIsClosed(t *testing.T) {
	const limit = 300 * time.Millisecond
	_, addr := serveWith(t, 1000, func(o *Options) { o.WriteTimeout = limit })
	c := dial(t, addr)
	keys := make([]uint64, 1000)
	for i := range keys {
		keys[i] = uint64(i)
	}
	req := proto.AppendFrame(nil, &proto.RpcMeta{HasRequest: true, Service: []byte(proto.DictServiceFull), Method: []byte("seek")},
		proto.AppendDictRequest(nil, keys, false))
	go func() { // about 46 KB of response per 3 KB request; 200 MB in all
		for range 4000 {
			if _, err := c.Write(req); err != nil {
				return
			}
		}
	}()
	waitMetric(t, addr, 1, 10*time.Second, "cube_connections_closed_total", `reason="slow_write"`)
}

// TestAllMissRequestStaysSmall asks for 50,000 missing keys of a shard whose
// largest value is 16 KiB: the response must cost about 12 bytes per key,
// not the largest value per key.
func TestAllMissRequestStaysSmall(t *testing.T) {
	data := t.TempDir()
	publishSized(t, data, "1000000000", 10, 16<<10, 1)
	_, addr := serveOpts(t, Options{DataDir: data})
	c, err := client.Dial(addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	keys := make([]uint64, 50_000)
	for i := range keys {
		keys[i] = uint64(1_000_000 + i)
	}
	if _, _, err := c.Seek(keys[:10], false, time.Now().Add(5*time.Second)); err != nil { // warm up
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	vals, _, err := c.Seek(keys, false, time.Now().Add(30*time.Second))
	runtime.ReadMemStats(&after)
	if err != nil || len(vals) != len(keys) || vals[0].Status != proto.StatusMiss {
		t.Fatalf("%d values, err %v", len(vals), err)
	}
	// Client and server share this process: request (~200 KB), keys
	// (400 KB), response (600 KB) on both sides, plus growth.
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 16<<20 {
		t.Fatalf("a 50,000-key all-miss request allocated %d MiB", alloc>>20)
	}
}

// TestKeyLimit checks that there is none by default (as in Paddle's cube)
// and that a limit set by the operator is refused with EREQUEST, which brpc
// does not retry, and counted.
func TestKeyLimit(t *testing.T) {
	keys := make([]uint64, 150_000)
	for i := range keys {
		keys[i] = uint64(i)
	}
	_, addr := serve(t, 100)
	c, err := client.Dial(addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if vals, _, err := c.Seek(keys, false, time.Now().Add(10*time.Second)); err != nil || len(vals) != len(keys) {
		t.Fatalf("150,000 keys without --max-keys: %d values, %v", len(vals), err)
	}

	_, addr = serveWith(t, 100, func(o *Options) { o.MaxKeys = 10 })
	c2, err := client.Dial(addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	_, _, err = c2.Seek(keys[:11], false, time.Now().Add(5*time.Second))
	var rerr *client.RPCError
	if !errors.As(err, &rerr) || rerr.Code != proto.EREQUEST || !strings.Contains(rerr.Text, "--max-keys 10") {
		t.Fatalf("11 keys with --max-keys 10: %v, want EREQUEST naming --max-keys", err)
	}
	if _, _, err := c2.Seek(keys[:10], false, time.Now().Add(5*time.Second)); err != nil {
		t.Fatalf("10 keys: %v", err)
	}
	if n := metric(t, addr, "cube_requests_total", `protocol="baidu_std"`, `result="too_many_keys"`); n != 1 {
		t.Fatalf("too_many_keys = %v, want 1", n)
	}
}

// TestHTTPKeyLimitRefusedEarly declares a 50 MB body, sends the start of a
// key list longer than --max-keys and waits: the refusal must come without
// the rest of the body.
func TestHTTPKeyLimitRefusedEarly(t *testing.T) {
	_, addr := serveWith(t, 100, func(o *Options) { o.MaxKeys = 10 })
	c := dial(t, addr)
	fmt.Fprintf(c, "POST /DictService/seek HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 50000000\r\n\r\n")
	fmt.Fprintf(c, `{"keys":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,`)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer before the body was sent: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 400 || !bytes.Contains(body, []byte("--max-keys 10")) {
		t.Fatalf("%s: %s", resp.Status, body)
	}
	if n := metric(t, addr, "cube_requests_total", `protocol="http"`, `result="too_many_keys"`); n != 1 {
		t.Fatalf("too_many_keys = %v, want 1", n)
	}
}

// TestHTTPSeekJSON checks the streaming decoder and encoder against
// encoding/json's forms of the same messages.
func TestHTTPSeekJSON(t *testing.T) {
	_, addr := serveWith(t, 100, func(o *Options) { o.MaxKeys = 1000 })
	for _, tc := range []struct {
		body string
		code int
		keys []uint64
		ver  bool
	}{
		{`{"keys":[1,99,100],"version_required":true}`, 200, []uint64{1, 99, 100}, true},
		{` { "version_required" : false , "keys" : [ "7" , 18446744073709551615 ] } `, 200, []uint64{7, 1<<64 - 1}, false},
		{`{"log_id":{"a":[1,{"b":"]"}],"c":null},"keys":[3],"x":-1.5e3}`, 200, []uint64{3}, false},
		{`{"keys":null}`, 200, nil, false},
		{`{}`, 200, nil, false},
		{`{"keys":[1,2]} x`, 400, nil, false},
		{`{"keys":[-1]}`, 400, nil, false},
		{`{"keys":[1.5]}`, 400, nil, false},
		{`{"keys":[01]}`, 400, nil, false},
		{`{"keys":[18446744073709551616]}`, 400, nil, false},
		{`{"keys":[1,2`, 400, nil, false},
		{`[1,2]`, 400, nil, false},
		{`{"keys":[1],"a":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`, 400, nil, false},
	} {
		resp, err := http.Post("http://"+addr+"/DictService/seek", "application/json", strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.code {
			t.Errorf("%s: %s %s, want %d", tc.body, resp.Status, got, tc.code)
			continue
		}
		if tc.code != 200 {
			continue
		}
		want := SeekResponse{Values: []SeekValue{}}
		for _, k := range tc.keys {
			if k < 100 {
				v := make([]byte, 40)
				binary.LittleEndian.PutUint64(v, k)
				want.Values = append(want.Values, SeekValue{Value: v})
			} else {
				want.Values = append(want.Values, SeekValue{Status: proto.StatusMiss, Value: []byte{}})
			}
		}
		if tc.ver {
			var h struct{ Version string }
			r, err := http.Get("http://" + addr + "/healthz")
			if err != nil {
				t.Fatal(err)
			}
			json.NewDecoder(r.Body).Decode(&h)
			r.Body.Close()
			want.Version = &h.Version
		}
		var wantJSON bytes.Buffer
		json.NewEncoder(&wantJSON).Encode(want)
		if !bytes.Equal(got, wantJSON.Bytes()) {
			t.Errorf("%s:\n got %s\nwant %s", tc.body, got, wantJSON.Bytes())
		}
	}
}

// FuzzDecodeSeekJSON: no input crashes the decoder, and where encoding/json
// reads the same message its keys and flag agree. (Inputs with upper-case
// letters or escapes are left out: encoding/json matches field names
// case-insensitively and unescapes them, brpc's json2pb does neither.)
func FuzzDecodeSeekJSON(f *testing.F) {
	for _, s := range []string{`{"keys":[1,2,3],"version_required":true}`, `{"keys":["1"]}`, `{"a":{"b":[1,"x"]},"keys":[]}`, `{}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		keys, vr, tooMany, err := decodeSeekJSON(bufio.NewReader(bytes.NewReader(data)), nil, 100)
		if tooMany && len(keys) != 101 {
			t.Fatalf("tooMany with %d keys", len(keys))
		}
		if bytes.ContainsFunc(data, func(r rune) bool { return r >= 'A' && r <= 'Z' || r == '\\' }) {
			return
		}
		var req SeekRequest
		if json.Unmarshal(data, &req) != nil || err != nil || tooMany {
			return
		}
		if vr != req.VersionRequired || len(keys) != len(req.Keys) {
			t.Fatalf("decoder: %v %v; encoding/json: %v %v", keys, vr, req.Keys, req.VersionRequired)
		}
		for i := range keys {
			if keys[i] != req.Keys[i] {
				t.Fatalf("key %d: %d, encoding/json %d", i, keys[i], req.Keys[i])
			}
		}
	})
}

// TestOnlyPublishedVersionsLoad: with no token, the control API must not load
// a build in progress (.tmp-*), a directory without its manifest, or a path.
func TestOnlyPublishedVersionsLoad(t *testing.T) {
	data := t.TempDir()
	publishSized(t, data, "1000000000", 10, 40, 1)
	publishSized(t, data, "2000000000", 10, 40, 2)
	tmp := filepath.Join(data, ".tmp-3000000000-123")
	if err := os.Rename(filepath.Join(data, "2000000000"), tmp); err != nil {
		t.Fatal(err)
	}
	noManifest := filepath.Join(data, "4000000000")
	os.MkdirAll(noManifest, 0o755)
	if b, err := os.ReadFile(filepath.Join(tmp, "shard-0.cube")); err != nil {
		t.Fatal(err)
	} else {
		os.WriteFile(filepath.Join(noManifest, "shard-0.cube"), b, 0o644)
	}
	_, addr := serveOpts(t, Options{DataDir: data})
	for _, path := range []string{"/.tmp-3000000000-123", "/4000000000", "/../" + filepath.Base(data) + "/1000000000", "/1000000000/"} {
		code, body := controlCmd(t, addr, fmt.Sprintf(`{"cmd":"bg_load_base","version_path":%q}`, path))
		if code != 500 {
			t.Errorf("bg_load_base %s: %d %s, want 500", path, code, body)
		}
	}
	if code, body := controlCmd(t, addr, `{"cmd":"bg_load_base","version_path":"/1000000000"}`); code != 200 {
		t.Fatalf("bg_load_base of a published version: %d %s", code, body)
	}
}

func controlCmd(t *testing.T, addr, body string) (int, string) {
	t.Helper()
	resp, err := http.Post("http://"+addr+"/ControlService/cmd", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestTruncatedOnlyVersionFallsBackToMisses truncates the only version's
// file under an in-process server: requests that read it are refused
// (ELOGOFF, HTTP 503), never answered with partial values, and once the
// version is retired every key is a miss and /readyz says 503.
func TestTruncatedOnlyVersionFallsBackToMisses(t *testing.T) {
	data := t.TempDir()
	publishSized(t, data, "1000000000", 20000, 40, 1)
	_, addr := serveOpts(t, Options{DataDir: data})
	keys := make([]uint64, 1000)
	for i := range keys {
		keys[i] = uint64(i * 19)
	}
	c, err := client.Dial(addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, _, err := c.Seek(keys, false, time.Now().Add(5*time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filepath.Join(data, "1000000000", "shard-0.cube"), 4096); err != nil {
		t.Fatal(err)
	}
	refused := 0
	for i := 0; ; i++ {
		if i == 100 {
			t.Fatal("still refusing after 100 requests")
		}
		vals, v, err := c.Seek(keys, true, time.Now().Add(5*time.Second))
		var rerr *client.RPCError
		if errors.As(err, &rerr) && rerr.Code == proto.ELOGOFF && strings.Contains(rerr.Text, "1000000000") {
			refused++
			resp, err := http.Post("http://"+addr+"/DictService/seek", "application/json", strings.NewReader(`{"keys":[0,19,38]}`))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 503 && resp.StatusCode != 200 {
				t.Fatalf("HTTP seek while faulted: %s", resp.Status)
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		for _, val := range vals {
			if val.Status != proto.StatusMiss {
				t.Fatalf("version %q answered %+v after the fault", v, val)
			}
		}
		break
	}
	if refused == 0 {
		t.Fatal("no request was refused")
	}
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 {
		t.Fatalf("/readyz after the fault: %s", resp.Status)
	}
	if n := metric(t, addr, "cube_dict_faults_total"); n != 1 {
		t.Fatalf("cube_dict_faults_total = %v", n)
	}
}
