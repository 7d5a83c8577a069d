package samples

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/elasticctr/terraform-provider-ctr/internal/cubetest"
)

// TestEach_ElasticCTRsSampleLines: the 100 lines Serving's ElasticCTR client demo sends, with
// its slot.conf (slots 0..26): each has a click of 0 or 1 and, per slot, its feasigns modulo
// the table size, or the key 0 where the line has none.
func TestEach_ElasticCTRsSampleLines(t *testing.T) {
	dir := cubetest.PaddleData(t, "serving-elastic-ctr")
	f, err := os.Open(filepath.Join(dir, "slot.conf"))
	if err != nil {
		t.Fatal(err)
	}
	slots, err := ReadSlots(f)
	f.Close()
	if err != nil || len(slots.Names) != 27 {
		t.Fatalf("slot.conf: %v, %v", slots, err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "data.txt"))
	if err != nil {
		t.Fatal(err)
	}
	const dim = 1000001
	lines, clicks, padded := 0, 0, 0
	err = slots.Each(strings.NewReader(string(data)), dim, func(n int, s Sample) error {
		lines++
		clicks += s.Click
		if s.Show != 1 || (s.Click != 0 && s.Click != 1) || len(s.Keys) != 27 {
			t.Errorf("line %d: show %d click %d, %d slots", n, s.Show, s.Click, len(s.Keys))
		}
		for _, ks := range s.Keys {
			for _, k := range ks {
				if k >= dim {
					t.Errorf("line %d: key %d not below %d", n, k, dim)
				}
			}
			if len(ks) == 1 && ks[0] == 0 {
				padded++
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The data's README: 100 lines, 22 clicks, 24-27 feasigns per line over 27 slots.
	if lines != 100 || clicks != 22 || padded == 0 {
		t.Errorf("%d lines, %d clicks, %d padded slots", lines, clicks, padded)
	}
	first := strings.SplitN(string(data), "\n", 2)[0]
	s, err := slots.Parse(first, dim)
	if err != nil {
		t.Fatal(err)
	}
	// The line's first pair is 6927017134761466251:0, above int64's range's half: modulo
	// the table size as an unsigned number, as Python's int does.
	if want := uint64(6927017134761466251 % dim); s.Keys[0][0] != want {
		t.Errorf("slot 0: %d, want %d", s.Keys[0][0], want)
	}
}

func TestParse_Refuses(t *testing.T) {
	slots, err := ReadSlots(strings.NewReader("1\n2\n"))
	if err != nil {
		t.Fatal(err)
	}
	for line, want := range map[string]string{
		"1":                          "want show, click",
		"x 0 1:1":                    "show",
		"1 0 11":                     "not feasign:slot",
		"1 0 -3:1":                   "feasign",
		"1 0 18446744073709551616:1": "feasign",
	} {
		if _, err := slots.Parse(line, 0); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", line, err, want)
		}
	}
	s, err := slots.Parse("1 1 5:2 7:9", 0)
	if err != nil || len(s.Keys) != 2 || s.Keys[0][0] != 0 || s.Keys[1][0] != 5 {
		t.Errorf("an unlisted slot is skipped, a missing one padded: %+v, %v", s, err)
	}
	if _, err := ReadSlots(strings.NewReader("1\n1\n")); err == nil {
		t.Error("a slot listed twice")
	}
}

// FuzzParse: any line either fails or gives every listed slot at least one key below the
// table size.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{"1 0 6927017134761466251:0 6718470718629228516:1", "1 1", "0 0 5:9", "1 0 x:1", ""} {
		f.Add(seed)
	}
	slots, err := ReadSlots(strings.NewReader("0\n1\n2\n"))
	if err != nil {
		f.Fatal(err)
	}
	const dim = 1000001
	f.Fuzz(func(t *testing.T, line string) {
		s, err := slots.Parse(line, dim)
		if err != nil {
			return
		}
		if len(s.Keys) != 3 {
			t.Fatalf("%d slots", len(s.Keys))
		}
		for _, ks := range s.Keys {
			if len(ks) == 0 {
				t.Fatal("a slot without keys")
			}
			for _, k := range ks {
				if k >= dim {
					t.Fatalf("key %d", k)
				}
			}
		}
	})
}
