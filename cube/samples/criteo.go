package samples

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
)

// Criteo reads raw Criteo lines, the input of Paddle Serving's CTR-with-cube example
// (examples/C++/PaddleRec/criteo_ctr_with_cube/criteo_reader.py): tab-separated, a label,
// 13 integer features and 26 categorical ones, any of them empty. Test lines without the
// label (39 fields, as Serving's demo client data) are read too, with Click -1.
//
// As that reader does, each integer feature becomes (x - min) / range with the example's
// fixed bounds (0 when empty), and each categorical feature one key in its own slot:
// hash(str(idx) + value) % sparse_dim, idx its field number counting the label as 0. The
// example hashes with Python's hash(), which Python 3 salts per process, so no other program
// can reproduce it; this reader uses FNV-1a (64-bit), and a table for it must be trained with
// the same rule.
type Criteo struct{}

// The example reader's bounds of the 13 integer features.
var (
	criteoMin  = [CriteoDense]float32{0, -3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	criteoDiff = [CriteoDense]float32{20, 603, 100, 50, 64000, 500, 100, 50, 500, 10, 10, 10, 50}
)

// The shape of a Criteo line.
const (
	CriteoDense  = 13
	CriteoSparse = 26
)

// Parse turns one line into a Sample: Dense holds the 13 scaled integer features, Keys the 26
// categorical ones, one key per slot.
func (Criteo) Parse(line string, sparseDim uint64) (Sample, error) {
	fields := strings.Split(strings.TrimRight(line, "\r\n"), "\t")
	out := Sample{Show: 1, Click: -1}
	switch len(fields) {
	case 1 + CriteoDense + CriteoSparse:
		click, err := strconv.Atoi(fields[0])
		if err != nil {
			return Sample{}, fmt.Errorf("label %q: %w", fields[0], err)
		}
		out.Click = click
		fields = fields[1:]
	case CriteoDense + CriteoSparse:
	default:
		return Sample{}, fmt.Errorf("%d tab-separated fields; a Criteo line has %d (a label, %d integers, %d categories) or %d without the label",
			len(fields), 1+CriteoDense+CriteoSparse, CriteoDense, CriteoSparse, CriteoDense+CriteoSparse)
	}
	for i, f := range fields[:CriteoDense] {
		v := float32(0)
		if f != "" {
			x, err := strconv.ParseFloat(f, 32)
			if err != nil {
				return Sample{}, fmt.Errorf("integer feature %d: %q: %w", i+1, f, err)
			}
			v = (float32(x) - criteoMin[i]) / criteoDiff[i]
		}
		out.Dense = append(out.Dense, v)
	}
	for i, f := range fields[CriteoDense:] {
		h := fnv.New64a()
		h.Write([]byte(strconv.Itoa(1 + CriteoDense + i)))
		h.Write([]byte(f))
		k := h.Sum64()
		if sparseDim > 0 {
			k %= sparseDim
		}
		out.Keys = append(out.Keys, []uint64{k})
	}
	return out, nil
}
