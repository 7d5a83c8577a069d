package samples

import (
	"hash/fnv"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/elasticctr/terraform-provider-ctr/internal/cubetest"
)

// TestCriteo_ServingsDemoLines: the 1,000 raw lines of Serving's CTR demo client (no label)
// each give 13 scaled integers (0 where empty) and 26 one-key slots below sparse_dim; the
// first line's values, worked by hand from the reader's bounds.
func TestCriteo_ServingsDemoLines(t *testing.T) {
	path := filepath.Join(cubetest.PaddleData(t, "serving-ctr-model"), "criteo_test_data.txt")
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const dim = 1000001
	lines := 0
	err = Each(Criteo{}, f, dim, func(n int, s Sample) error {
		lines++
		if len(s.Dense) != CriteoDense || len(s.Keys) != CriteoSparse || s.Click != -1 {
			t.Fatalf("line %d: %d dense, %d slots, click %d", n, len(s.Dense), len(s.Keys), s.Click)
		}
		for _, ks := range s.Keys {
			if len(ks) != 1 || ks[0] >= dim {
				t.Fatalf("line %d: slot keys %v", n, ks)
			}
		}
		if n == 1 {
			// "\t29\t50\t5\t7260\t437\t1\t4\t14\t\t1\t0\t6\t5a9ed9b0\t..."
			want := []float32{0, (29 + 3) / 603., 50 / 100., 5 / 50., 7260 / 64000., 437 / 500., 1 / 100., 4 / 50., 14 / 500., 0, 1 / 10., 0, 6 / 50.}
			for i := range want {
				if d := s.Dense[i] - want[i]; d > 1e-6 || d < -1e-6 {
					t.Errorf("dense %d: %v, want %v", i, s.Dense[i], want[i])
				}
			}
			h := fnv.New64a()
			h.Write([]byte(strconv.Itoa(14) + "5a9ed9b0"))
			if s.Keys[0][0] != h.Sum64()%dim {
				t.Errorf("slot 0: key %d, want FNV-1a(\"145a9ed9b0\") %% %d", s.Keys[0][0], dim)
			}
		}
		return nil
	})
	if err != nil || lines != 1000 {
		t.Fatalf("%d lines, %v", lines, err)
	}
}

// TestCriteo_LabelAndRefusals: a training line's label is its click; other field counts and
// non-numeric integers are refused with the reason.
func TestCriteo_LabelAndRefusals(t *testing.T) {
	line := "1" + strings.Repeat("\t3", CriteoDense) + strings.Repeat("\tab", CriteoSparse)
	s, err := Criteo{}.Parse(line, 0)
	if err != nil || s.Click != 1 || s.Dense[0] != 3./20 {
		t.Fatalf("%+v, %v", s, err)
	}
	for line, want := range map[string]string{
		"1\t2\t3":                "3 tab-separated fields",
		"x" + line[1:]:           "label",
		"1\tq" + line[3:]:        "integer feature 1",
		strings.Repeat("\t", 45): "46 tab-separated fields",
	} {
		if _, err := (Criteo{}).Parse(line, 0); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", line, err, want)
		}
	}
}

func FuzzParseCriteo(f *testing.F) {
	f.Add("1" + strings.Repeat("\t3", CriteoDense) + strings.Repeat("\tab", CriteoSparse))
	f.Add(strings.Repeat("\t", CriteoDense+CriteoSparse-1))
	f.Fuzz(func(t *testing.T, line string) {
		s, err := Criteo{}.Parse(line, 1000)
		if err != nil {
			return
		}
		if len(s.Dense) != CriteoDense || len(s.Keys) != CriteoSparse {
			t.Fatalf("%d dense, %d slots", len(s.Dense), len(s.Keys))
		}
		for _, ks := range s.Keys {
			if len(ks) != 1 || ks[0] >= 1000 {
				t.Fatalf("keys %v", ks)
			}
		}
	})
}
