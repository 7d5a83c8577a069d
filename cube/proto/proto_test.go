package proto

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
	"testing/iotest"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	gproto "google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

// cubeFile is cube.proto (package rec.mcube, proto2) as a descriptor, so the
// hand-written codec is checked against the real protobuf runtime, required
// fields included.
func cubeFile(t testing.TB) protoreflect.FileDescriptor {
	t.Helper()
	s := gproto.String
	opt := descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum()
	req := descriptorpb.FieldDescriptorProto_LABEL_REQUIRED.Enum()
	rep := descriptorpb.FieldDescriptorProto_LABEL_REPEATED.Enum()
	f := func(name string, num int32, l *descriptorpb.FieldDescriptorProto_Label, typ descriptorpb.FieldDescriptorProto_Type, msg string) *descriptorpb.FieldDescriptorProto {
		fd := &descriptorpb.FieldDescriptorProto{Name: s(name), Number: gproto.Int32(num), Label: l, Type: typ.Enum()}
		if msg != "" {
			fd.TypeName = s(msg)
		}
		return fd
	}
	T := descriptorpb.FieldDescriptorProto_TYPE_UINT64
	fdp := &descriptorpb.FileDescriptorProto{
		Name: s("cube.proto"), Package: s("rec.mcube"), Syntax: s("proto2"),
		MessageType: []*descriptorpb.DescriptorProto{
			{Name: s("DictRequest"), Field: []*descriptorpb.FieldDescriptorProto{
				f("keys", 1, rep, T, ""),
				f("version_required", 2, opt, descriptorpb.FieldDescriptorProto_TYPE_BOOL, ""),
			}},
			{Name: s("DictValue"), Field: []*descriptorpb.FieldDescriptorProto{
				f("status", 1, req, descriptorpb.FieldDescriptorProto_TYPE_UINT32, ""),
				f("value", 2, req, descriptorpb.FieldDescriptorProto_TYPE_BYTES, ""),
			}},
			{Name: s("DictResponse"), Field: []*descriptorpb.FieldDescriptorProto{
				f("values", 1, rep, descriptorpb.FieldDescriptorProto_TYPE_MESSAGE, ".rec.mcube.DictValue"),
				f("version", 2, opt, descriptorpb.FieldDescriptorProto_TYPE_STRING, ""),
			}},
		},
	}
	fd, err := protodesc.NewFile(fdp, nil)
	if err != nil {
		t.Fatal(err)
	}
	return fd
}

func TestDictResponseMatchesProtobuf(t *testing.T) {
	fd := cubeFile(t)
	var b []byte
	b = AppendDictValue(b, 0, []byte("abc"))
	b = AppendDictMiss(b)
	b = AppendDictValue(b, 0, nil) // found, empty value: both fields must still be there
	b = AppendDictVersion(b, "1700000000")
	msg := dynamicpb.NewMessage(fd.Messages().ByName("DictResponse"))
	if err := gproto.Unmarshal(b, msg); err != nil { // checks required fields
		t.Fatal(err)
	}
	vals := msg.Get(fd.Messages().ByName("DictResponse").Fields().ByName("values")).List()
	if vals.Len() != 3 {
		t.Fatalf("%d values", vals.Len())
	}
	vd := fd.Messages().ByName("DictValue").Fields()
	want := []Value{{0, []byte("abc")}, {StatusMiss, nil}, {0, nil}}
	for i, w := range want {
		m := vals.Get(i).Message()
		if st := uint32(m.Get(vd.ByName("status")).Uint()); st != w.Status {
			t.Errorf("value %d: status %d, want %d", i, st, w.Status)
		}
		if !bytes.Equal(m.Get(vd.ByName("value")).Bytes(), w.Value) {
			t.Errorf("value %d: wrong bytes", i)
		}
		if !m.Has(vd.ByName("status")) || !m.Has(vd.ByName("value")) {
			t.Errorf("value %d: required field missing on the wire", i)
		}
	}
	// And our decoder reads back what the protobuf runtime writes.
	out, err := gproto.MarshalOptions{Deterministic: true}.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	got, ver, err := DecodeDictResponse(out, nil)
	if err != nil || ver != "1700000000" || len(got) != 3 || got[1].Status != StatusMiss || string(got[0].Value) != "abc" {
		t.Fatalf("decode: %v %q %+v", err, ver, got)
	}
	if _, _, err := DecodeDictResponse([]byte{0x0a, 0x02, 0x08, 0x00}, nil); !errors.Is(err, ErrMissingField) {
		t.Fatalf("DictValue without value: err = %v", err)
	}
}

func TestDictRequestPackedAndUnpacked(t *testing.T) {
	fd := cubeFile(t)
	keys := []uint64{0, 1, 1 << 63, ^uint64(0), 42}
	md := fd.Messages().ByName("DictRequest")
	msg := dynamicpb.NewMessage(md)
	l := msg.Mutable(md.Fields().ByName("keys")).List()
	for _, k := range keys {
		l.Append(protoreflect.ValueOfUint64(k))
	}
	msg.Set(md.Fields().ByName("version_required"), protoreflect.ValueOfBool(true))
	unpacked, _ := gproto.Marshal(msg)
	// The runtime does not fix the order of fields on the wire for dynamic messages (it
	// varies from run to run), so compare what the bytes mean, not the bytes.
	ours := dynamicpb.NewMessage(md)
	if err := gproto.Unmarshal(AppendDictRequest(nil, keys, true), ours); err != nil {
		t.Fatalf("the protobuf runtime cannot decode AppendDictRequest: %v", err)
	}
	if !gproto.Equal(ours, msg) {
		t.Fatalf("AppendDictRequest differs from the protobuf runtime:\n%x\n%x", AppendDictRequest(nil, keys, true), unpacked)
	}
	// Packed form, as a proto3 or [packed=true] client would send.
	packed := []byte{0x0a}
	var inner []byte
	for _, k := range keys {
		inner = appendVarint(inner, k)
	}
	packed = append(appendVarint(packed, uint64(len(inner))), inner...)
	for _, enc := range [][]byte{unpacked, packed} {
		got, vr, tooMany, err := DecodeDictRequest(enc, nil, 0)
		if err != nil || tooMany || len(got) != len(keys) {
			t.Fatalf("decode %x: %v %v %v", enc, got, tooMany, err)
		}
		for i := range keys {
			if got[i] != keys[i] {
				t.Fatalf("key %d = %d", i, got[i])
			}
		}
		_ = vr
	}
	if _, _, tooMany, _ := DecodeDictRequest(unpacked, nil, 3); !tooMany {
		t.Fatal("maxKeys not enforced")
	}
}

func appendVarint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

func TestFrameRoundTrip(t *testing.T) {
	meta := RpcMeta{HasRequest: true, Service: []byte(DictServiceFull), Method: []byte(SeekMethod), CorrelationID: 77, LogID: 5}
	payload := AppendDictRequest(nil, []uint64{1, 2, 3}, false)
	frame := AppendFrame(nil, &meta, payload)
	var f Frame
	if _, err := ReadFrame(bytes.NewReader(frame), nil, 1<<20, &f); err != nil {
		t.Fatal(err)
	}
	if string(f.Meta.Service) != DictServiceFull || string(f.Meta.Method) != "seek" || f.Meta.CorrelationID != 77 || !bytes.Equal(f.Payload, payload) {
		t.Fatalf("got %+v", f)
	}
	if _, err := ReadFrame(bytes.NewReader(frame), nil, 10, &f); !errors.Is(err, ErrFrameTooBig) {
		t.Fatalf("limit: err = %v", err)
	}
	bad := bytes.Clone(frame)
	bad[0] = 'X'
	if _, err := ReadFrame(bytes.NewReader(bad), nil, 1<<20, &f); !errors.Is(err, ErrBadMagic) {
		t.Fatalf("magic: err = %v", err)
	}
	resp := RpcMeta{HasResponse: true, ErrorCode: ENOMETHOD, ErrorText: []byte("no"), CorrelationID: 77}
	frame = AppendFrame(nil, &resp, nil)
	if _, err := ReadFrame(bytes.NewReader(frame), nil, 1<<20, &f); err != nil || f.Meta.ErrorCode != ENOMETHOD || f.Meta.CorrelationID != 77 {
		t.Fatalf("response meta: %v %+v", err, f.Meta)
	}
}

func BenchmarkEncodeResponse1000(b *testing.B) {
	v := make([]byte, 40)
	buf := make([]byte, 0, 64<<10)
	b.ReportAllocs()
	for b.Loop() {
		buf = buf[:0]
		for i := 0; i < 1000; i++ {
			buf = AppendDictValue(buf, 0, v)
		}
	}
}

// FuzzReadFrame reads the input as a stream of frames three ways: at once,
// one byte at a time, and with a memory hook that refuses buffers over 1 KiB.
// All must agree frame by frame, the body buffer must never exceed twice the
// bytes read nor the declared body, and a refusal must surface as the hook's
// error.
func FuzzReadFrame(f *testing.F) {
	meta := RpcMeta{HasRequest: true, Service: []byte(DictServiceFull), Method: []byte(SeekMethod), CorrelationID: 1}
	f.Add(AppendFrame(nil, &meta, AppendDictRequest(nil, []uint64{1, 2}, true)))
	f.Add([]byte("PRPC\x00\x00\x00\x00\x00\x00\x00\x00"))
	f.Add([]byte("PRPC\x00\x00\xff\xff\x00\x00\x00\x00partial"))
	f.Add(AppendFrame(nil, &meta, bytes.Repeat([]byte{8, 1}, 3000)))
	errRefused := errors.New("refused")
	f.Fuzz(func(t *testing.T, data []byte) {
		whole := bytes.NewReader(data)
		slow := iotest.OneByteReader(bytes.NewReader(data))
		hooked := bytes.NewReader(data)
		var fw, fs, fh Frame
		var bw, bs, bh []byte
		for {
			var errW, errS, errH error
			prevCap := cap(bw)
			bw, errW = ReadFrame(whole, bw, 1<<16, &fw)
			bs, errS = ReadFrame(slow, bs, 1<<16, &fs)
			bh, errH = ReadFrameFunc(hooked, bh, 1<<16, &fh, func(n int) error {
				if n > 1<<10 {
					return errRefused
				}
				return nil
			})
			if (errW == nil) != (errS == nil) {
				t.Fatalf("whole read: %v, byte by byte: %v", errW, errS)
			}
			if errW == nil && (!bytes.Equal(bw, bs) || fw.Meta.CorrelationID != fs.Meta.CorrelationID) {
				t.Fatalf("byte-by-byte read differs")
			}
			if errH == nil && (errW != nil || !bytes.Equal(bh, bw)) {
				t.Fatalf("hooked read: %v, whole read: %v", errH, errW)
			}
			if errH != nil && errW == nil && (!errors.Is(errH, errRefused) || len(bw) <= 1<<10) {
				t.Fatalf("hooked read failed with %v on a frame of %d bytes", errH, len(bw))
			}
			if errW != nil {
				return
			}
			if cap(bw) != prevCap && cap(bw) > max(2*len(bw), FirstChunk) {
				t.Fatalf("buffer of %d bytes for a %d-byte body", cap(bw), len(bw))
			}
			if errH != nil {
				hooked = bytes.NewReader(nil) // out of step with the others from here
			}
		}
	})
}

// decodeDictRequestGeneric decodes a DictRequest with protowire alone, as
// DecodeDictRequest did before its fast path: the reference the fuzzer
// holds the fast path to.
func decodeDictRequestGeneric(b []byte) (keys []uint64, versionRequired bool, err error) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, false, ErrMalformed
		}
		b = b[n:]
		switch {
		case num == 1 && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return nil, false, ErrMalformed
			}
			keys, b = append(keys, v), b[n:]
		case num == 1 && typ == protowire.BytesType:
			packed, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return nil, false, ErrMalformed
			}
			b = b[n:]
			for len(packed) > 0 {
				v, n := protowire.ConsumeVarint(packed)
				if n < 0 {
					return nil, false, ErrMalformed
				}
				keys, packed = append(keys, v), packed[n:]
			}
		case num == 2 && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return nil, false, ErrMalformed
			}
			versionRequired, b = v != 0, b[n:]
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return nil, false, ErrMalformed
			}
			b = b[n:]
		}
	}
	return keys, versionRequired, nil
}

func TestDecodeDictRequestFastPath(t *testing.T) {
	// Varints of every length, the 10-byte limit, and overlong or cut ones.
	keys := []uint64{0, 1, 127, 128, 1<<14 - 1, 1 << 14, 1<<35 + 3, 1<<63 - 1, 1 << 63, ^uint64(0)}
	req := AppendDictRequest(nil, keys, true)
	got, vr, tooMany, err := DecodeDictRequest(req, nil, 0)
	if err != nil || !vr || tooMany || !slices.Equal(got, keys) {
		t.Fatalf("got %v %v %v %v", got, vr, tooMany, err)
	}
	for _, bad := range [][]byte{
		{keyTag},       // no varint
		{keyTag, 0x80}, // cut varint
		{keyTag, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02},       // 10th byte > 1: overflow
		{keyTag, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00}, // 11 bytes
	} {
		if _, _, _, err := DecodeDictRequest(bad, nil, 0); err == nil {
			t.Errorf("% x decoded", bad)
		}
		if _, _, err := decodeDictRequestGeneric(bad); err == nil {
			t.Errorf("generic: % x decoded", bad)
		}
	}
	if _, _, tooMany, _ := DecodeDictRequest(req, nil, 3); !tooMany {
		t.Error("more than maxKeys keys accepted")
	}
}

// TestUvarint holds the fast varint decoder to protowire's on every length,
// with trailing bytes of every kind and cut short (seed printed).
func TestUvarint(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	for i := 0; i < 100_000; i++ {
		v := rng.Uint64() >> rng.UintN(64)
		b := protowire.AppendVarint(nil, v)
		for j := rng.IntN(12); j > 0; j-- {
			b = append(b, byte(rng.Uint32()))
		}
		if rng.IntN(4) == 0 { // overlong or garbage
			b = append([]byte{0xff, 0x80}, b...)
		}
		b = b[:rng.IntN(len(b)+1)]
		want, wn := protowire.ConsumeVarint(b)
		got, n := uvarint(b)
		if (wn < 0) != (n <= 0) || wn >= 0 && (got != want || n != wn) {
			t.Fatalf("% x: uvarint %d,%d; protowire %d,%d", b, got, n, want, wn)
		}
	}
}

// BenchmarkDecodeRequest1000 decodes 1,000 unpacked keys: small ones (the
// benchmark's, 1 to 3 bytes) and 64-bit hashes (Paddle's feature signs, 9
// or 10 bytes).
func BenchmarkDecodeRequest1000(b *testing.B) {
	for _, c := range []struct {
		name string
		key  func(i uint64) uint64
	}{
		{"small", func(i uint64) uint64 { return i * 997 % 1_000_000 }},
		{"hash64", func(i uint64) uint64 { return (i + 1) * 0x9E3779B97F4A7C15 }},
	} {
		b.Run(c.name, func(b *testing.B) {
			keys := make([]uint64, 1000)
			for i := range keys {
				keys[i] = c.key(uint64(i))
			}
			req := AppendDictRequest(nil, keys, false)
			out := make([]uint64, 0, 1000)
			b.ReportAllocs()
			b.SetBytes(int64(len(req)))
			for b.Loop() {
				out, _, _, _ = DecodeDictRequest(req, out[:0], 0)
			}
		})
	}
}

func FuzzDecodeDict(f *testing.F) {
	f.Add(AppendDictRequest(nil, []uint64{1, 2, ^uint64(0)}, true))
	f.Add(AppendDictVersion(AppendDictMiss(AppendDictValue(nil, 0, []byte("x"))), "v"))
	f.Add(AppendDictValue(nil, 7, []byte("abc"))[2:]) // a bare DictValue
	f.Fuzz(func(t *testing.T, data []byte) {
		keys, vr, _, err := DecodeDictRequest(data, nil, 1000)
		all, allVR, _, allErr := DecodeDictRequest(data, nil, 0)
		ref, refVR, refErr := decodeDictRequestGeneric(data)
		if (allErr == nil) != (refErr == nil) || allErr == nil && (!slices.Equal(all, ref) || allVR != refVR) {
			t.Fatalf("fast path: %v %v %v; generic: %v %v %v", all, allVR, allErr, ref, refVR, refErr)
		}
		if err == nil && len(keys) <= 1000 {
			// Re-encoding (unpacked) must decode to the same keys.
			again, vr2, _, err := DecodeDictRequest(AppendDictRequest(nil, keys, vr), nil, 0)
			if err != nil || len(again) != len(keys) || vr2 != vr {
				t.Fatalf("re-encode mismatch: %v", err)
			}
		}
		_, _, _ = DecodeDictResponse(data, nil)
		if fast, err := decodeDictValue(data); err == nil {
			slow, err := decodeDictValueSlow(data)
			if err != nil || slow.Status != fast.Status || !bytes.Equal(slow.Value, fast.Value) {
				t.Fatalf("fast path %+v, slow path %+v (%v)", fast, slow, err)
			}
		}
		var m RpcMeta
		if m.Unmarshal(data) == nil {
			var m2 RpcMeta
			if err := m2.Unmarshal(m.Append(nil)); err != nil {
				t.Fatalf("re-encoded meta does not decode: %v", err)
			}
		}
	})
}

func TestAppendDictValueForms(t *testing.T) {
	// The one-byte fast path and the general path must agree with the
	// protobuf runtime for every length around the boundary.
	fd := cubeFile(t)
	for _, n := range []int{0, 1, 123, 124, 127, 128, 300} {
		for _, st := range []uint32{0, 1, StatusMiss} {
			v := bytes.Repeat([]byte{'x'}, n)
			b := AppendDictValue(nil, st, v)
			msg := dynamicpb.NewMessage(fd.Messages().ByName("DictResponse"))
			if err := gproto.Unmarshal(b, msg); err != nil {
				t.Fatalf("len %d status %d: %v", n, st, err)
			}
			got, _, err := DecodeDictResponse(b, nil)
			if err != nil || len(got) != 1 || got[0].Status != st || !bytes.Equal(got[0].Value, v) {
				t.Fatalf("len %d status %d: %+v %v", n, st, got, err)
			}
		}
	}
}

// rpcMetaFile is brpc's baidu_rpc_meta.proto (the fields we use plus two we
// skip) as a descriptor, to check RpcMeta against the protobuf runtime.
func rpcMetaFile(t testing.TB) protoreflect.FileDescriptor {
	t.Helper()
	s := gproto.String
	opt := descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum()
	req := descriptorpb.FieldDescriptorProto_LABEL_REQUIRED.Enum()
	f := func(name string, num int32, l *descriptorpb.FieldDescriptorProto_Label, typ descriptorpb.FieldDescriptorProto_Type, msg string) *descriptorpb.FieldDescriptorProto {
		fd := &descriptorpb.FieldDescriptorProto{Name: s(name), Number: gproto.Int32(num), Label: l, Type: typ.Enum()}
		if msg != "" {
			fd.TypeName = s(msg)
		}
		return fd
	}
	const (
		str   = descriptorpb.FieldDescriptorProto_TYPE_STRING
		i32   = descriptorpb.FieldDescriptorProto_TYPE_INT32
		i64   = descriptorpb.FieldDescriptorProto_TYPE_INT64
		bytes = descriptorpb.FieldDescriptorProto_TYPE_BYTES
		msg   = descriptorpb.FieldDescriptorProto_TYPE_MESSAGE
	)
	fdp := &descriptorpb.FileDescriptorProto{
		Name: s("baidu_rpc_meta.proto"), Package: s("brpc.policy"), Syntax: s("proto2"),
		MessageType: []*descriptorpb.DescriptorProto{
			{Name: s("RpcMeta"), Field: []*descriptorpb.FieldDescriptorProto{
				f("request", 1, opt, msg, ".brpc.policy.RpcRequestMeta"),
				f("response", 2, opt, msg, ".brpc.policy.RpcResponseMeta"),
				f("compress_type", 3, opt, i32, ""),
				f("correlation_id", 4, opt, i64, ""),
				f("attachment_size", 5, opt, i32, ""),
				f("authentication_data", 7, opt, bytes, ""),
			}},
			{Name: s("RpcRequestMeta"), Field: []*descriptorpb.FieldDescriptorProto{
				f("service_name", 1, req, str, ""),
				f("method_name", 2, req, str, ""),
				f("log_id", 3, opt, i64, ""),
				f("request_id", 7, opt, str, ""),
				f("timeout_ms", 8, opt, i32, ""),
			}},
			{Name: s("RpcResponseMeta"), Field: []*descriptorpb.FieldDescriptorProto{
				f("error_code", 1, opt, i32, ""),
				f("error_text", 2, opt, str, ""),
			}},
		},
	}
	fd, err := protodesc.NewFile(fdp, nil)
	if err != nil {
		t.Fatal(err)
	}
	return fd
}

func TestRpcMetaMatchesProtobuf(t *testing.T) {
	fd := rpcMetaFile(t)
	md := fd.Messages().ByName("RpcMeta")
	rq := fd.Messages().ByName("RpcRequestMeta")
	// What a brpc C++ client sends, with fields we skip.
	m := dynamicpb.NewMessage(md)
	r := dynamicpb.NewMessage(rq)
	r.Set(rq.Fields().ByName("service_name"), protoreflect.ValueOfString(DictServiceFull))
	r.Set(rq.Fields().ByName("method_name"), protoreflect.ValueOfString(SeekMethod))
	r.Set(rq.Fields().ByName("log_id"), protoreflect.ValueOfInt64(9))
	r.Set(rq.Fields().ByName("request_id"), protoreflect.ValueOfString("abc"))
	r.Set(rq.Fields().ByName("timeout_ms"), protoreflect.ValueOfInt32(200))
	m.Set(md.Fields().ByName("request"), protoreflect.ValueOfMessage(r))
	m.Set(md.Fields().ByName("correlation_id"), protoreflect.ValueOfInt64(1<<40))
	m.Set(md.Fields().ByName("attachment_size"), protoreflect.ValueOfInt32(3))
	m.Set(md.Fields().ByName("authentication_data"), protoreflect.ValueOfBytes([]byte("token")))
	b, err := gproto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var got RpcMeta
	if err := got.Unmarshal(b); err != nil {
		t.Fatal(err)
	}
	if !got.HasRequest || string(got.Service) != DictServiceFull || string(got.Method) != SeekMethod ||
		got.LogID != 9 || got.CorrelationID != 1<<40 || got.AttachmentSize != 3 {
		t.Fatalf("decoded %+v", got)
	}
	// What our server answers must parse, with the error and the id.
	resp := RpcMeta{HasResponse: true, ErrorCode: ENOSERVICE, ErrorText: []byte("no such service"), CorrelationID: -5}
	back := dynamicpb.NewMessage(md)
	if err := gproto.Unmarshal(resp.Append(nil), back); err != nil {
		t.Fatal(err)
	}
	rs := fd.Messages().ByName("RpcResponseMeta").Fields()
	rm := back.Get(md.Fields().ByName("response")).Message()
	if back.Get(md.Fields().ByName("correlation_id")).Int() != -5 || rm.Get(rs.ByName("error_code")).Int() != ENOSERVICE ||
		rm.Get(rs.ByName("error_text")).String() != "no such service" {
		t.Fatalf("runtime read %v", back)
	}
	// Our request meta carries both required fields.
	req := RpcMeta{HasRequest: true, Service: []byte(DictServiceShort), Method: []byte(SeekMethod), CorrelationID: 1}
	if err := gproto.Unmarshal(req.Append(nil), dynamicpb.NewMessage(md)); err != nil {
		t.Fatalf("request meta: %v", err)
	}
}
