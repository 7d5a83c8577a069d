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
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return ErrMalformed
		}
		b = b[n:]
		switch {
		case num == 1 && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return ErrMalformed
			}
			m.HasRequest = true
			if err := m.unmarshalRequest(v); err != nil {
				return err
			}
			b = b[n:]
		case num == 2 && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return ErrMalformed
			}
			m.HasResponse = true
			if err := m.unmarshalResponse(v); err != nil {
				return err
			}
			b = b[n:]
		case num == 3 && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return ErrMalformed
			}
			m.CompressType = int32(v)
			b = b[n:]
		case num == 4 && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return ErrMalformed
			}
			m.CorrelationID = int64(v)
			b = b[n:]
		case num == 5 && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return ErrMalformed
			}
			m.AttachmentSize = int32(v)
			b = b[n:]
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return ErrMalformed
			}
			b = b[n:]
		}
	}
	return nil
}

func (m *RpcMeta) unmarshalRequest(b []byte) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return ErrMalformed
		}
		b = b[n:]
		switch {
		case num == 1 && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return ErrMalformed
			}
			m.Service, b = v, b[n:]
		case num == 2 && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return ErrMalformed
			}
			m.Method, b = v, b[n:]
		case num == 3 && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return ErrMalformed
			}
			m.LogID, b = int64(v), b[n:]
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return ErrMalformed
			}
			b = b[n:]
		}
	}
	return nil
}

func (m *RpcMeta) unmarshalResponse(b []byte) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return ErrMalformed
		}
		b = b[n:]
		switch {
		case num == 1 && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return ErrMalformed
			}
			m.ErrorCode, b = int32(v), b[n:]
		case num == 2 && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return ErrMalformed
			}
			m.ErrorText, b = v, b[n:]
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return ErrMalformed
			}
			b = b[n:]
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
