package paddle

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"google.golang.org/protobuf/encoding/protowire"
)

// MaxProgramBytes bounds a ProgramDesc read whole (PaddleRec's 408-slot
// inference program is 1.3 MB).
const MaxProgramBytes = 256 << 20

// Program is a decoded ProgramDesc (framework.proto): its blocks, block 0
// first. The decoder knows the Fluid 1.x fields and skips the others (Paddle
// 2.x's float64, var-name and scalar attributes among them).
//
//	ProgramDesc   blocks = 1 (BlockDesc), version = 4 (Version{version = 1})
//	BlockDesc     idx = 1, parent_idx = 2, vars = 3 (VarDesc), ops = 4 (OpDesc)
//	VarDesc       name = 1, type = 2 (VarType), persistable = 3
//	VarType       type = 1, selected_rows = 2 (TensorDesc),
//	              lod_tensor = 3 and tensor_array = 4 (both {tensor = 1 TensorDesc, lod_level = 2})
//	TensorDesc    data_type = 1, dims = 2 (-1 for a dimension known only at run time)
//	OpDesc        inputs = 1 and outputs = 2 (Var{parameter = 1, arguments = 2}), type = 3, attrs = 4
//	OpDesc.Attr   name = 1, type = 2, i = 3, f = 4, s = 5, ints = 6, floats = 7, strings = 8,
//	              b = 10, bools = 11, block_idx = 12, l = 13, blocks_idx = 14, longs = 15
type Program struct {
	Blocks []Block
	// Version is the Paddle version the program was saved with (1007000
	// for 1.7.0), 0 where the program does not say.
	Version int64
}

// Block is a BlockDesc: its variables and its ops, in program order.
type Block struct {
	Idx, ParentIdx int32
	Vars           []Var
	Ops            []Op
}

// Var is a variable of a ProgramDesc.
type Var struct {
	Name        string
	Type        int32 // VarType.Type: LOD_TENSOR 7, SELECTED_ROWS 8, FEED_MINIBATCH 9, FETCH_LIST 10, READER 15
	Persistable bool
	// DataType and Dims describe the elements of a LOD_TENSOR, SELECTED_ROWS
	// or LOD_TENSOR_ARRAY variable (Dims may hold -1, a dimension known only
	// at run time); LoDLevel is the LoD levels a LoDTensor carries.
	DataType DType
	Dims     []int64
	LoDLevel int
}

// Op is an OpDesc: an operator, its arguments and its attributes.
type Op struct {
	Type string
	// Inputs and Outputs map each of the op's parameters (such as "X") to
	// the variables bound to it, in order.
	Inputs, Outputs map[string][]string
	Attrs           map[string]Attr
}

// AttrType is OpDesc.Attr's type: which field of an Attr holds its value.
type AttrType int32

// The attribute types of framework.proto's AttrType.
const (
	AttrInt     AttrType = 0
	AttrFloat   AttrType = 1
	AttrString  AttrType = 2
	AttrInts    AttrType = 3
	AttrFloats  AttrType = 4
	AttrStrings AttrType = 5
	AttrBool    AttrType = 6
	AttrBools   AttrType = 7
	AttrBlock   AttrType = 8
	AttrLong    AttrType = 9
	AttrBlocks  AttrType = 10
	AttrLongs   AttrType = 11
)

var attrTypeNames = [...]string{"INT", "FLOAT", "STRING", "INTS", "FLOATS", "STRINGS", "BOOLEAN", "BOOLEANS", "BLOCK", "LONG", "BLOCKS", "LONGS"}

func (t AttrType) String() string {
	if t >= 0 && int(t) < len(attrTypeNames) {
		return attrTypeNames[t]
	}
	return fmt.Sprintf("attribute type %d", int32(t))
}

// Attr is an attribute of an op; Type says which field holds its value.
type Attr struct {
	Type    AttrType
	Int     int32   // i
	Float   float32 // f
	String  string  // s
	Ints    []int32
	Floats  []float32
	Strings []string
	Bool    bool // b
	Bools   []bool
	Block   int32 // block_idx
	Long    int64 // l
	Blocks  []int32
	Longs   []int64
}

// VarType values that are never saved as parameters (Paddle io.is_persistable).
const (
	typeFeedMinibatch = 9
	typeFetchList     = 10
	typeReader        = 15
)

// MaxProgramItems bounds the blocks, variables, ops, op arguments,
// attributes and attribute strings of one program, counted together, so
// that a small hostile program cannot make the decoder build a huge one;
// real programs, PaddleRec's 408-slot one included, stay far below it.
// Numeric attribute lists are bounded by MaxProgramBytes alone: decoded,
// they take at most 8 times their bytes.
const MaxProgramItems = 1 << 20

// ParseProgram decodes a ProgramDesc. It refuses what Paddle could not have
// saved: a variable or op without its required fields, a dimension below -1,
// more than MaxDims dimensions, a LoD level outside 0..MaxLoDLevels, more
// than MaxProgramItems items.
func ParseProgram(b []byte) (*Program, error) {
	if len(b) > MaxProgramBytes {
		return nil, fmt.Errorf("program: %d bytes, more than %d", len(b), MaxProgramBytes)
	}
	d := &programDecoder{}
	p := &Program{}
	err := fields(b, "ProgramDesc", func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		switch {
		case num == 1 && typ == protowire.BytesType:
			if err := d.count(); err != nil {
				return err
			}
			bl, err := d.block(v, len(p.Blocks))
			if err != nil {
				return err
			}
			p.Blocks = append(p.Blocks, bl)
		case num == 4 && typ == protowire.BytesType:
			return fields(v, "Version", func(num protowire.Number, typ protowire.Type, _ []byte, x uint64) error {
				if num == 1 && typ == protowire.VarintType {
					p.Version = int64(x)
				}
				return nil
			})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return p, nil
}

// ProgramVars decodes a ProgramDesc and lists the variables of every block,
// in order.
func ProgramVars(b []byte) ([]Var, error) {
	p, err := ParseProgram(b)
	if err != nil {
		return nil, err
	}
	var vars []Var
	for _, bl := range p.Blocks {
		vars = append(vars, bl.Vars...)
	}
	return vars, nil
}

// programDecoder counts what it builds against MaxProgramItems.
type programDecoder struct{ items int }

func (d *programDecoder) count() error {
	if d.items++; d.items > MaxProgramItems {
		return fmt.Errorf("program: more than %d blocks, variables, ops, arguments and attributes", MaxProgramItems)
	}
	return nil
}

func (d *programDecoder) block(b []byte, i int) (Block, error) {
	var bl Block
	err := fields(b, "BlockDesc", func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
		switch {
		case num == 1 && typ == protowire.VarintType:
			bl.Idx = int32(x)
		case num == 2 && typ == protowire.VarintType:
			bl.ParentIdx = int32(x)
		case num == 3 && typ == protowire.BytesType:
			if err := d.count(); err != nil {
				return err
			}
			vr, err := parseVar(v)
			if err != nil {
				return fmt.Errorf("block %d var %d: %w", i, len(bl.Vars), err)
			}
			bl.Vars = append(bl.Vars, vr)
		case num == 4 && typ == protowire.BytesType:
			if err := d.count(); err != nil {
				return err
			}
			op, err := d.op(v)
			if err != nil {
				return fmt.Errorf("block %d op %d: %w", i, len(bl.Ops), err)
			}
			bl.Ops = append(bl.Ops, op)
		}
		return nil
	})
	return bl, err
}

func parseVar(b []byte) (Var, error) {
	var (
		v               Var
		haveName, haveT bool
	)
	err := fields(b, "VarDesc", func(num protowire.Number, typ protowire.Type, p []byte, x uint64) error {
		switch {
		case num == 1 && typ == protowire.BytesType:
			v.Name, haveName = string(p), true
		case num == 2 && typ == protowire.BytesType:
			return fields(p, "VarType", func(num protowire.Number, typ protowire.Type, p []byte, x uint64) error {
				switch {
				case num == 1 && typ == protowire.VarintType:
					v.Type, haveT = int32(x), true
				case num == 2 && typ == protowire.BytesType:
					return v.tensorDesc(p)
				case (num == 3 || num == 4) && typ == protowire.BytesType:
					return v.lodTensorDesc(p)
				}
				return nil
			})
		case num == 3 && typ == protowire.VarintType:
			v.Persistable = x != 0
		}
		return nil
	})
	if err != nil && haveName {
		err = fmt.Errorf("%q: %w", v.Name, err)
	}
	if err == nil && (!haveName || !haveT) {
		err = fmt.Errorf("VarDesc %q: name and type are required", v.Name)
	}
	return v, err
}

// lodTensorDesc decodes a LoDTensorDesc (or LoDTensorArrayDesc): tensor = 1,
// lod_level = 2.
func (v *Var) lodTensorDesc(b []byte) error {
	return fields(b, "LoDTensorDesc", func(num protowire.Number, typ protowire.Type, p []byte, x uint64) error {
		switch {
		case num == 1 && typ == protowire.BytesType:
			return v.tensorDesc(p)
		case num == 2 && typ == protowire.VarintType:
			l := int32(x)
			if l < 0 || l > MaxLoDLevels {
				return fmt.Errorf("lod_level %d: want 0-%d", l, MaxLoDLevels)
			}
			v.LoDLevel = int(l)
		}
		return nil
	})
}

// tensorDesc decodes a TensorDesc whose dims may hold -1.
func (v *Var) tensorDesc(b []byte) error {
	dt, dims, err := parseTensorDesc(b)
	if err != nil {
		return fmt.Errorf("TensorDesc: %w", err)
	}
	for _, d := range dims {
		if d < -1 {
			return fmt.Errorf("TensorDesc: dims %v: want each ≥ 0, or -1 for one known only at run time", dims)
		}
	}
	v.DataType, v.Dims = dt, dims
	return nil
}

func (d *programDecoder) op(b []byte) (Op, error) {
	var (
		op       Op
		haveType bool
	)
	err := fields(b, "OpDesc", func(num protowire.Number, typ protowire.Type, p []byte, _ uint64) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case 1, 2:
			m := &op.Inputs
			if num == 2 {
				m = &op.Outputs
			}
			if *m == nil {
				*m = map[string][]string{}
			}
			return d.opVar(p, *m)
		case 3:
			op.Type, haveType = string(p), true
		case 4:
			if err := d.count(); err != nil {
				return err
			}
			name, a, err := d.attr(p)
			if err != nil {
				return err
			}
			if op.Attrs == nil {
				op.Attrs = map[string]Attr{}
			}
			op.Attrs[name] = a
		}
		return nil
	})
	if err == nil && !haveType {
		err = errors.New("OpDesc: no type (field 3 is required)")
	}
	if err != nil && haveType {
		err = fmt.Errorf("%s: %w", op.Type, err)
	}
	return op, err
}

// opVar decodes an OpDesc.Var into m: the arguments of a parameter named
// twice are appended, as Paddle's OpDesc does.
func (d *programDecoder) opVar(b []byte, m map[string][]string) error {
	var (
		param     string
		haveParam bool
		args      []string
	)
	err := fields(b, "OpDesc.Var", func(num protowire.Number, typ protowire.Type, p []byte, _ uint64) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case 1:
			param, haveParam = string(p), true
		case 2:
			if err := d.count(); err != nil {
				return err
			}
			args = append(args, string(p))
		}
		return nil
	})
	if err == nil && !haveParam {
		err = errors.New("OpDesc.Var: no parameter (field 1 is required)")
	}
	if err != nil {
		return err
	}
	m[param] = append(m[param], args...)
	return nil
}

// attr decodes an OpDesc.Attr. Repeated numbers may come unpacked (as
// Paddle's proto2 writes them) or packed.
func (d *programDecoder) attr(b []byte) (string, Attr, error) {
	var (
		a                  Attr
		name               string
		haveName, haveType bool
	)
	err := fields(b, "OpDesc.Attr", func(num protowire.Number, typ protowire.Type, p []byte, x uint64) error {
		isBytes := typ == protowire.BytesType
		switch {
		case num == 1 && isBytes:
			name, haveName = string(p), true
		case num == 2 && typ == protowire.VarintType:
			a.Type, haveType = AttrType(int32(x)), true
		case num == 3 && typ == protowire.VarintType:
			a.Int = int32(x)
		case num == 4 && typ == protowire.Fixed32Type:
			a.Float = math.Float32frombits(uint32(x))
		case num == 5 && isBytes:
			a.String = string(p)
		case num == 6:
			return repeatedVarints(typ, p, x, func(x uint64) { a.Ints = append(a.Ints, int32(x)) })
		case num == 7:
			return repeatedFixed32s(typ, p, x, func(x uint32) { a.Floats = append(a.Floats, math.Float32frombits(x)) })
		case num == 8 && isBytes:
			if err := d.count(); err != nil {
				return err
			}
			a.Strings = append(a.Strings, string(p))
		case num == 10 && typ == protowire.VarintType:
			a.Bool = x != 0
		case num == 11:
			return repeatedVarints(typ, p, x, func(x uint64) { a.Bools = append(a.Bools, x != 0) })
		case num == 12 && typ == protowire.VarintType:
			a.Block = int32(x)
		case num == 13 && typ == protowire.VarintType:
			a.Long = int64(x)
		case num == 14:
			return repeatedVarints(typ, p, x, func(x uint64) { a.Blocks = append(a.Blocks, int32(x)) })
		case num == 15:
			return repeatedVarints(typ, p, x, func(x uint64) { a.Longs = append(a.Longs, int64(x)) })
		}
		return nil
	})
	if err != nil && haveName {
		err = fmt.Errorf("attribute %q: %w", name, err)
	}
	if err == nil && (!haveName || !haveType) {
		err = fmt.Errorf("OpDesc.Attr %q: name and type are required", name)
	}
	return name, a, err
}

// repeatedVarints calls fn with the value of an unpacked varint field, or
// each value of a packed one; other wire types are skipped.
func repeatedVarints(typ protowire.Type, p []byte, x uint64, fn func(uint64)) error {
	switch typ {
	case protowire.VarintType:
		fn(x)
	case protowire.BytesType:
		for len(p) > 0 {
			v, n := protowire.ConsumeVarint(p)
			if n < 0 {
				return fmt.Errorf("packed varints: %w", protowire.ParseError(n))
			}
			fn(v)
			p = p[n:]
		}
	}
	return nil
}

// repeatedFixed32s is repeatedVarints for a fixed32 (float) field.
func repeatedFixed32s(typ protowire.Type, p []byte, x uint64, fn func(uint32)) error {
	switch typ {
	case protowire.Fixed32Type:
		fn(uint32(x))
	case protowire.BytesType:
		if len(p)%4 != 0 {
			return fmt.Errorf("packed floats: %d bytes, not a multiple of 4", len(p))
		}
		for ; len(p) > 0; p = p[4:] {
			fn(binary.LittleEndian.Uint32(p))
		}
	}
	return nil
}

// fields calls fn for each field of a protobuf message: for a bytes field
// with its payload, for a varint, fixed32 or fixed64 with its value.
func fields(b []byte, msg string, fn func(protowire.Number, protowire.Type, []byte, uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("%s: %w", msg, protowire.ParseError(n))
		}
		b = b[n:]
		var (
			payload []byte
			x       uint64
		)
		switch typ {
		case protowire.BytesType:
			payload, n = protowire.ConsumeBytes(b)
		case protowire.VarintType:
			x, n = protowire.ConsumeVarint(b)
		case protowire.Fixed32Type:
			var v uint32
			v, n = protowire.ConsumeFixed32(b)
			x = uint64(v)
		case protowire.Fixed64Type:
			x, n = protowire.ConsumeFixed64(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return fmt.Errorf("%s field %d: %w", msg, num, protowire.ParseError(n))
		}
		b = b[n:]
		if err := fn(num, typ, payload, x); err != nil {
			return err
		}
	}
	return nil
}

// PersistableNames lists the variables Paddle's save_combine writes into a
// combined params file, in the order it writes them: the persistable ones
// (less feed, fetch and reader variables), each name once, sorted.
func PersistableNames(vars []Var) []string {
	var names []string
	for _, v := range vars {
		if !v.Persistable || v.Type == typeFeedMinibatch || v.Type == typeFetchList || v.Type == typeReader {
			continue
		}
		names = append(names, v.Name)
	}
	slices.Sort(names)
	return slices.Compact(names)
}
