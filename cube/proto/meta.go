package proto

import (
	"google.golang.org/protobuf/encoding/protowire"
)

// brpc error codes (brpc/errno.proto) used by the server.
const (
	ENOSERVICE = 1001 // service not found
	ENOMETHOD  = 1002 // method not found
	EREQUEST   = 1003 // bad request
	EINTERNAL  = 2001 // internal error
	ELOGOFF    = 2003 // the server is not serving (brpc's client retries it on another replica)
	ELIMIT     = 2004 // a limit was hit
)

// RpcMeta is the subset of brpc.policy.RpcMeta the cube needs. Strings alias
// the decoded buffer only as []byte to avoid allocations; see Service/Method.
//
//	message RpcMeta {
//	  optional RpcRequestMeta request = 1;   // {1 service_name, 2 method_name, 3 log_id, ...}
//	  optional RpcResponseMeta response = 2; // {1 error_code, 2 error_text}
//	  optional int32 compress_type = 3;
//	  optional int64 correlation_id = 4;
//	  optional int32 attachment_size = 5;
//	  ... (6 chunk_info, 7 authentication_data, 8 stream_settings, 9 user_fields: skipped)
//	}
type RpcMeta struct {
	HasRequest     bool
	Service        []byte
	Method         []byte
	LogID          int64
	HasResponse    bool
	ErrorCode      int32
	ErrorText      []byte
	CompressType   int32
	CorrelationID  int64
	AttachmentSize int32
}

// Reset clears m for reuse.
func (m *RpcMeta) Reset() { *m = RpcMeta{} }

// Unmarshal decodes b into m (slices alias b).
func (m *RpcMeta) Unmarshal(b []byte) error {
	m.Reset()
	return eachField(b, func(f field) error {
		switch {
		case f.is(1, protowire.BytesType):
			m.HasRequest = true
			return m.unmarshalRequest(f.b)
		case f.is(2, protowire.BytesType):
			m.HasResponse = true
			return m.unmarshalResponse(f.b)
		case f.is(3, protowire.VarintType):
			m.CompressType = int32(f.u)
		case f.is(4, protowire.VarintType):
			m.CorrelationID = int64(f.u)
		case f.is(5, protowire.VarintType):
			m.AttachmentSize = int32(f.u)
		}
		return nil
	})
}

func (m *RpcMeta) unmarshalRequest(b []byte) error {
	return eachField(b, func(f field) error {
		switch {
		case f.is(1, protowire.BytesType):
			m.Service = f.b
		case f.is(2, protowire.BytesType):
			m.Method = f.b
		case f.is(3, protowire.VarintType):
			m.LogID = int64(f.u)
		}
		return nil
	})
}

func (m *RpcMeta) unmarshalResponse(b []byte) error {
	return eachField(b, func(f field) error {
		switch {
		case f.is(1, protowire.VarintType):
			m.ErrorCode = int32(f.u)
		case f.is(2, protowire.BytesType):
			m.ErrorText = f.b
		}
		return nil
	})
}

// field is one field of a message as eachField decodes it: its number and wire type, the
// value of a varint in u, the bytes of a length-delimited field in b (aliasing the message).
type field struct {
	num protowire.Number
	typ protowire.Type
	u   uint64
	b   []byte
}

func (f field) is(num protowire.Number, typ protowire.Type) bool { return f.num == num && f.typ == typ }

// eachField calls fn with each field of msg in order and stops at fn's first error. The
// values of other wire types (fixed32, fixed64, groups) are checked and skipped; a field
// that is truncated or malformed is ErrMalformed. The hot decoders (a request's keys, a
// response's values) keep loops of their own with fast paths.
func eachField(msg []byte, fn func(f field) error) error {
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return ErrMalformed
		}
		msg = msg[n:]
		f := field{num: num, typ: typ}
		switch typ {
		case protowire.VarintType:
			f.u, n = protowire.ConsumeVarint(msg)
		case protowire.BytesType:
			f.b, n = protowire.ConsumeBytes(msg)
		default:
			n = protowire.ConsumeFieldValue(num, typ, msg)
		}
		if n < 0 {
			return ErrMalformed
		}
		msg = msg[n:]
		if err := fn(f); err != nil {
			return err
		}
	}
	return nil
}

// Append serializes m. A request meta carries service and method; a response
// meta carries the error only when ErrorCode != 0 (as brpc does).
func (m *RpcMeta) Append(b []byte) []byte {
	if m.HasRequest {
		inner := protowire.SizeTag(1) + protowire.SizeBytes(len(m.Service)) +
			protowire.SizeTag(2) + protowire.SizeBytes(len(m.Method))
		if m.LogID != 0 {
			inner += protowire.SizeTag(3) + protowire.SizeVarint(uint64(m.LogID))
		}
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(inner))
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendBytes(b, m.Service)
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendBytes(b, m.Method)
		if m.LogID != 0 {
			b = protowire.AppendTag(b, 3, protowire.VarintType)
			b = protowire.AppendVarint(b, uint64(m.LogID))
		}
	}
	if m.HasResponse {
		inner := 0
		if m.ErrorCode != 0 {
			inner += protowire.SizeTag(1) + protowire.SizeVarint(uint64(int64(m.ErrorCode)))
		}
		if len(m.ErrorText) > 0 {
			inner += protowire.SizeTag(2) + protowire.SizeBytes(len(m.ErrorText))
		}
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(inner))
		if m.ErrorCode != 0 {
			b = protowire.AppendTag(b, 1, protowire.VarintType)
			b = protowire.AppendVarint(b, uint64(int64(m.ErrorCode)))
		}
		if len(m.ErrorText) > 0 {
			b = protowire.AppendTag(b, 2, protowire.BytesType)
			b = protowire.AppendBytes(b, m.ErrorText)
		}
	}
	if m.CompressType != 0 {
		b = protowire.AppendTag(b, 3, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(int64(m.CompressType)))
	}
	b = protowire.AppendTag(b, 4, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(m.CorrelationID))
	if m.AttachmentSize != 0 {
		b = protowire.AppendTag(b, 5, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(int64(m.AttachmentSize)))
	}
	return b
}
