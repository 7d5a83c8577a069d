package paddle

import (
	"fmt"
	"slices"

	"google.golang.org/protobuf/encoding/protowire"
)

// MaxProgramBytes bounds a ProgramDesc read whole (PaddleRec's 408-slot
// inference program is 1.3 MB).
const MaxProgramBytes = 256 << 20

// Var is a variable of a ProgramDesc.
type Var struct {
	Name        string
	Type        int32 // VarType.Type: LOD_TENSOR 7, SELECTED_ROWS 8, FEED_MINIBATCH 9, FETCH_LIST 10, READER 15
	Persistable bool
}

// VarType values that are never saved as parameters (Paddle io.is_persistable).
const (
	typeFeedMinibatch = 9
	typeFetchList     = 10
	typeReader        = 15
)

// ProgramVars decodes a ProgramDesc (framework.proto: blocks = 1; BlockDesc
// vars = 3; VarDesc name = 1, type = 2 {type = 1}, persistable = 3) and lists
// the variables of every block, in order.
func ProgramVars(b []byte) ([]Var, error) {
	if len(b) > MaxProgramBytes {
		return nil, fmt.Errorf("program: %d bytes, more than %d", len(b), MaxProgramBytes)
	}
	var vars []Var
	err := fields(b, "ProgramDesc", func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if num != 1 || typ != protowire.BytesType {
			return nil
		}
		return fields(v, "BlockDesc", func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
			if num != 3 || typ != protowire.BytesType {
				return nil
			}
			vr, err := parseVar(v)
			if err != nil {
				return err
			}
			vars = append(vars, vr)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return vars, nil
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
			return fields(p, "VarType", func(num protowire.Number, typ protowire.Type, _ []byte, x uint64) error {
				if num == 1 && typ == protowire.VarintType {
					v.Type, haveT = int32(x), true
				}
				return nil
			})
		case num == 3 && typ == protowire.VarintType:
			v.Persistable = x != 0
		}
		return nil
	})
	if err == nil && (!haveName || !haveT) {
		err = fmt.Errorf("VarDesc %q: name and type are required", v.Name)
	}
	return v, err
}

// fields calls fn for each field of a protobuf message: for a bytes field
// with its payload, for a varint with its value.
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
