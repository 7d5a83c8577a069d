package paddle

import (
	"maps"
	"math"
	"slices"

	"google.golang.org/protobuf/encoding/protowire"
)

// Marshal encodes the program as Paddle saves a ProgramDesc (framework.proto: the fields
// ParseProgram reads), so that a stand-in trainer can save a model Paddle's loaders, and
// ours, read. Map-valued inputs, outputs and attributes are written in name order.
func (p *Program) Marshal() []byte {
	var b []byte
	for _, bl := range p.Blocks {
		b = appendMessage(b, 1, bl.marshal())
	}
	if p.Version != 0 {
		b = appendMessage(b, 4, protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), uint64(p.Version)))
	}
	return b
}

func (bl Block) marshal() []byte {
	b := appendVarintField(nil, 1, uint64(bl.Idx))
	b = appendVarintField(b, 2, uint64(int64(bl.ParentIdx)))
	for _, v := range bl.Vars {
		b = appendMessage(b, 3, v.marshal())
	}
	for _, op := range bl.Ops {
		b = appendMessage(b, 4, op.marshal())
	}
	return b
}

func (v Var) marshal() []byte {
	b := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), v.Name)
	t := appendVarintField(nil, 1, uint64(v.Type))
	if v.Type == typeLoDTensor {
		lt := appendMessage(nil, 1, tensorDesc(v.DataType, v.Dims))
		if v.LoDLevel != 0 {
			lt = appendVarintField(lt, 2, uint64(v.LoDLevel))
		}
		t = appendMessage(t, 3, lt)
	}
	b = appendMessage(b, 2, t)
	if v.Persistable {
		b = appendVarintField(b, 3, 1)
	}
	return b
}

func (op Op) marshal() []byte {
	var b []byte
	for _, io := range []struct {
		field protowire.Number
		m     map[string][]string
	}{{1, op.Inputs}, {2, op.Outputs}} {
		for _, name := range slices.Sorted(maps.Keys(io.m)) {
			v := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), name)
			for _, arg := range io.m[name] {
				v = protowire.AppendString(protowire.AppendTag(v, 2, protowire.BytesType), arg)
			}
			b = appendMessage(b, io.field, v)
		}
	}
	b = protowire.AppendString(protowire.AppendTag(b, 3, protowire.BytesType), op.Type)
	for _, name := range slices.Sorted(maps.Keys(op.Attrs)) {
		b = appendMessage(b, 4, op.Attrs[name].marshal(name))
	}
	return b
}

func (a Attr) marshal(name string) []byte {
	b := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), name)
	b = appendVarintField(b, 2, uint64(a.Type))
	switch a.Type {
	case AttrInt:
		b = appendVarintField(b, 3, uint64(int64(a.Int)))
	case AttrFloat:
		b = protowire.AppendFixed32(protowire.AppendTag(b, 4, protowire.Fixed32Type), math.Float32bits(a.Float))
	case AttrString:
		b = protowire.AppendString(protowire.AppendTag(b, 5, protowire.BytesType), a.String)
	case AttrInts:
		for _, x := range a.Ints {
			b = appendVarintField(b, 6, uint64(int64(x)))
		}
	case AttrFloats:
		for _, x := range a.Floats {
			b = protowire.AppendFixed32(protowire.AppendTag(b, 7, protowire.Fixed32Type), math.Float32bits(x))
		}
	case AttrStrings:
		for _, s := range a.Strings {
			b = protowire.AppendString(protowire.AppendTag(b, 8, protowire.BytesType), s)
		}
	case AttrBool:
		b = appendVarintField(b, 10, boolVarint(a.Bool))
	case AttrBools:
		for _, x := range a.Bools {
			b = appendVarintField(b, 11, boolVarint(x))
		}
	case AttrBlock:
		b = appendVarintField(b, 12, uint64(int64(a.Block)))
	case AttrLong:
		b = appendVarintField(b, 13, uint64(a.Long))
	case AttrBlocks:
		for _, x := range a.Blocks {
			b = appendVarintField(b, 14, uint64(int64(x)))
		}
	case AttrLongs:
		for _, x := range a.Longs {
			b = appendVarintField(b, 15, uint64(x))
		}
	}
	return b
}

// typeLoDTensor is VarType.LOD_TENSOR.
const typeLoDTensor = 7

func appendMessage(b []byte, num protowire.Number, msg []byte) []byte {
	return protowire.AppendBytes(protowire.AppendTag(b, num, protowire.BytesType), msg)
}

func appendVarintField(b []byte, num protowire.Number, x uint64) []byte {
	return protowire.AppendVarint(protowire.AppendTag(b, num, protowire.VarintType), x)
}

func boolVarint(v bool) uint64 {
	if v {
		return 1
	}
	return 0
}
