package donefile

import (
	"strconv"
	"strings"
	"testing"
)

// FuzzParse: donefiles come over HTTP from whatever the trainers (or anyone with write access
// to the model output) wrote. Parse must never panic, and every entry it returns must be one
// the transfer can act on: decimal id and key, a non-empty input.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"id":"1562000400","key":"1562000400","input":"/home/work/seqfile"}` + "\n"))
	f.Add([]byte(`{"id":"1","key":"1","input":"/a"}` + "\n" + `garbage` + "\n" + `{"id":"2","key":"1","inp`))
	f.Add([]byte("\n\n{}\n[1,2]\n{\"id\":1}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		entries, warns := Parse(b)
		lines := strings.Count(string(b), "\n") + 1
		if len(entries)+len(warns) > lines {
			t.Fatalf("%d entries and %d warnings from %d lines", len(entries), len(warns), lines)
		}
		for _, e := range entries {
			if _, err := strconv.ParseUint(e.ID, 10, 64); err != nil {
				t.Fatalf("entry with non-decimal id %q", e.ID)
			}
			if _, err := strconv.ParseUint(e.Key, 10, 64); err != nil {
				t.Fatalf("entry with non-decimal key %q", e.Key)
			}
			if e.Input == "" {
				t.Fatalf("entry without input: %+v", e)
			}
		}
	})
}
