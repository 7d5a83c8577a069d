package proto

import "testing"

// TestSizeDictValue: the size SizeDictValue gives is what AppendDictValue
// appends, on both of its paths and across the varint lengths.
func TestSizeDictValue(t *testing.T) {
	for _, status := range []uint32{0, 1, 200, StatusMiss} {
		for _, n := range []int{0, 1, 123, 124, 127, 128, 16383, 16384, 1 << 21} {
			if got, want := SizeDictValue(status, n), len(AppendDictValue(nil, status, make([]byte, n))); got != want {
				t.Errorf("status %d, %d bytes: SizeDictValue %d, appended %d", status, n, got, want)
			}
		}
	}
}
