package bench

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/dict"
)

// TestInProcessBesideMemory measures a small dictionary in both memory
// modes: as many lookup rounds as memory rounds are kept, and the per-line
// figure is their quotient's median.
func TestInProcessBesideMemory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d.cube")
	w, err := dict.NewWriter(path)
	if err != nil {
		t.Fatal(err)
	}
	for k := range uint64(20_000) {
		if err := w.Add(k, make([]byte, valueSize)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	for _, inMemory := range []bool{false, true} {
		o := Options{Keys: 20_000, ValueSize: valueSize, Batch: 100, Duration: 20 * time.Millisecond, InMemory: inMemory}
		b, err := inProcessBesideMemory(path, o, nil)
		if err != nil {
			t.Fatal(err)
		}
		for name, s := range map[string]spread{"lookups": b.lookups, "memory": b.memory} {
			if !(s.lo > 0 && s.lo <= s.med && s.med <= s.hi) {
				t.Errorf("in memory %v: %s %+v", inMemory, name, s)
			}
		}
		if lo, hi := b.lookups.lo/b.memory.hi, b.lookups.hi/b.memory.lo; !(b.perLine >= lo && b.perLine <= hi) {
			t.Errorf("in memory %v: per line %v outside [%v, %v]", inMemory, b.perLine, lo, hi)
		}
	}
}

// TestLookupRatios prints each ratio line from the 1M and 50M rows of each
// memory mode, the per-line one from the rounds' quotients, and none for a
// mode measured at one size only.
func TestLookupRatios(t *testing.T) {
	serve := func(inMemory bool, rpc, inproc, memory, perLine float64) serveRow {
		return serveRow{inMemory: inMemory, lookups: Result{Keys: int64(rpc), Elapsed: time.Second},
			inproc: besideMemory{lookups: spread{med: inproc}, memory: spread{med: memory}, perLine: perLine}}
	}
	rows := []sizeRow{
		{n: 1_000_000, serves: []serveRow{serve(false, 8e6, 12e6, 60e6, 0.2), serve(true, 8e6, 12e6, 72e6, 0.16)}},
		{n: 50_000_000, serves: []serveRow{serve(true, 4e6, 4e6, 24e6, 0.18)}},
	}
	var b strings.Builder
	lookupRatios(rows, &b)
	want := "ratio lookups_50m_vs_1m=0.50\nratio lookups_inprocess_50m_vs_1m=0.33\nratio memory_50m_vs_1m=0.33\nratio lookups_per_line_50m_vs_1m=1.12\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}
