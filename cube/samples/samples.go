// Package samples reads CTR sample lines (and raw Criteo lines: see Criteo) in ElasticCTR's format, "show click feasign:slot
// ...", the lines its trainers read and its prediction client sends, and turns each into the
// keys a prediction looks up per slot, as ElasticCTR's reader does
// (fleet-ctr/criteo_dataset.py@c493c6b): a feasign's key is feasign % sparse_dim (the row of
// the embedding table), a slot slot.conf does not list is skipped, and a slot with no
// feasign gets the one key 0.
package samples

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// MaxLineBytes bounds one sample line (a real one is ~600 bytes).
const MaxLineBytes = 1 << 20

// Slots is slot.conf: the slot ids the model's inputs follow, in order.
type Slots struct {
	Names []string
	index map[string]int
}

// ReadSlots reads slot.conf: one slot id per line; blank lines are skipped.
func ReadSlots(r io.Reader) (*Slots, error) {
	s := &Slots{index: map[string]int{}}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		name := strings.TrimSpace(sc.Text())
		if name == "" {
			continue
		}
		if strings.ContainsAny(name, ": \t") {
			return nil, fmt.Errorf("slot.conf line %d: %q is not a slot id", n, name)
		}
		if _, dup := s.index[name]; dup {
			return nil, fmt.Errorf("slot.conf line %d: slot %q again", n, name)
		}
		s.index[name] = len(s.Names)
		s.Names = append(s.Names, name)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(s.Names) == 0 {
		return nil, errors.New("slot.conf lists no slot")
	}
	return s, nil
}

// Sample is one line: its show and click, per slot (in Slots' order) its keys, and the dense
// features of a format that has them (Criteo).
type Sample struct {
	Show, Click int
	Keys        [][]uint64
	Dense       []float32
}

// Format is a sample line format: ElasticCTR's (*Slots) or raw Criteo lines (Criteo).
type Format interface {
	Parse(line string, sparseDim uint64) (Sample, error)
}

// Parse turns one line into a Sample; sparseDim is the embedding table's row count (the
// trainers' SPARSE_DIM), 0 to keep feasigns as they are.
func (s *Slots) Parse(line string, sparseDim uint64) (Sample, error) {
	fields := strings.Fields(line)
	if len(fields) < 2 {
		return Sample{}, errors.New("want show, click, then feasign:slot pairs")
	}
	show, err := strconv.Atoi(fields[0])
	if err != nil {
		return Sample{}, fmt.Errorf("show %q: %w", fields[0], err)
	}
	click, err := strconv.Atoi(fields[1])
	if err != nil {
		return Sample{}, fmt.Errorf("click %q: %w", fields[1], err)
	}
	out := Sample{Show: show, Click: click, Keys: make([][]uint64, len(s.Names))}
	for _, pair := range fields[2:] {
		feasign, slot, ok := strings.Cut(pair, ":")
		if !ok {
			return Sample{}, fmt.Errorf("%q is not feasign:slot", pair)
		}
		i, listed := s.index[slot]
		if !listed {
			continue
		}
		k, err := strconv.ParseUint(feasign, 10, 64)
		if err != nil {
			return Sample{}, fmt.Errorf("feasign %q: %w", feasign, err)
		}
		if sparseDim > 0 {
			k %= sparseDim
		}
		out.Keys[i] = append(out.Keys[i], k)
	}
	for i := range out.Keys {
		if len(out.Keys[i]) == 0 {
			out.Keys[i] = []uint64{0}
		}
	}
	return out, nil
}

// Each calls fn with every sample of r, numbered from 1, and stops at fn's first error; a
// line it cannot parse is an error that names it. Blank lines are skipped.
func (s *Slots) Each(r io.Reader, sparseDim uint64, fn func(n int, smp Sample) error) error {
	return Each(s, r, sparseDim, fn)
}

// Each is (*Slots).Each for any format.
func Each(format Format, r io.Reader, sparseDim uint64, fn func(n int, smp Sample) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), MaxLineBytes)
	for n := 1; sc.Scan(); n++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		smp, err := format.Parse(sc.Text(), sparseDim)
		if err != nil {
			return fmt.Errorf("line %d: %w", n, err)
		}
		if err := fn(n, smp); err != nil {
			return err
		}
	}
	return sc.Err()
}
