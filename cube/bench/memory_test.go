package bench

import (
	"math"
	"testing"
	"time"
)

// TestMemoryReader reads a small working set in both page sizes: each round
// gives a finite rate above zero, and rounds go on past the end of the drawn
// offsets.
func TestMemoryReader(t *testing.T) {
	for _, huge := range []bool{false, true} {
		m, err := newMemoryReader(16<<20, huge)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			rate := m.round(50 * time.Millisecond)
			if rate <= 0 || math.IsInf(rate, 0) || math.IsNaN(rate) {
				t.Fatalf("huge pages %v: rate %v", huge, rate)
			}
		}
		m.next = len(m.offs) - 1 // the next group wraps to the first offset
		if rate := m.round(time.Millisecond); rate <= 0 || m.next > len(m.offs) {
			t.Fatalf("huge pages %v: after a wrap, rate %v, next %d", huge, rate, m.next)
		}
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
