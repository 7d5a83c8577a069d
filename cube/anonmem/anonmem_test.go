package anonmem

import "testing"

// TestMap maps a size that is not a whole number of huge pages in both
// modes: the slice is rounded up, writable and zero.
func TestMap(t *testing.T) {
	for _, huge := range []bool{false, true} {
		mem, err := Map(HugePage+1, huge)
		if err != nil {
			t.Fatal(err)
		}
		if len(mem) != 2*HugePage {
			t.Errorf("huge %v: %d bytes, want %d", huge, len(mem), 2*HugePage)
		}
		for _, i := range []int{0, HugePage, len(mem) - 1} {
			if mem[i] != 0 {
				t.Errorf("huge %v: byte %d is %d", huge, i, mem[i])
			}
			mem[i] = 1
		}
		if err := Unmap(mem); err != nil {
			t.Fatal(err)
		}
	}
}
