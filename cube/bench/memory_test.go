package bench

import (
	"math"
	"testing"
)

// TestMemoryReadRate reads a small working set in both page sizes: each
// gives a finite rate above zero.
func TestMemoryReadRate(t *testing.T) {
	for _, huge := range []bool{false, true} {
		rate, err := memoryReadRate(16<<20, huge)
		if err != nil {
			t.Fatal(err)
		}
		if rate <= 0 || math.IsInf(rate, 0) || math.IsNaN(rate) {
			t.Fatalf("huge pages %v: rate %v", huge, rate)
		}
	}
}
