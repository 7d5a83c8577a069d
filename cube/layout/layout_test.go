package layout

import "testing"

func TestValidVersion(t *testing.T) {
	for v, want := range map[string]bool{
		"1700000000": true, "1700000000_1700000100": true, "0": true,
		"": false, "-1": false, "+5": false, "017": false, "1_": false, "_1": false, "1_2_3": false, "1_-2": false, "v1": false, "1 ": false,
	} {
		if got := ValidVersion(v); got != want {
			t.Errorf("ValidVersion(%q) = %v, want %v", v, got, want)
		}
	}
}
