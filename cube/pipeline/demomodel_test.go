package pipeline

import (
	"strconv"
	"testing"

	"github.com/elasticctr/terraform-provider-ctr/cube/paddle/infer"
	"github.com/elasticctr/terraform-provider-ctr/cube/servingconf"
)

// TestWriteDemoModel: the demo's model is a program the interpreter loads, with one LoD
// feed per slot in its serving configuration, and its click probability moves with the
// embeddings it is given.
func TestWriteDemoModel(t *testing.T) {
	dir := t.TempDir()
	dm := DemoModel{Slots: 3, Width: 4, Hidden: 8}
	if err := WriteDemoModel(dir, dm); err != nil {
		t.Fatal(err)
	}
	m, err := infer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	conf, err := servingconf.ReadModelConf(dir)
	if err != nil || len(conf.GetFeedVar()) != dm.Slots || len(m.Feeds()) != dm.Slots {
		t.Fatalf("feeds: conf %d, program %d (%v)", len(conf.GetFeedVar()), len(m.Feeds()), err)
	}
	seen := map[float32]bool{}
	for k := range uint64(5) {
		in := map[string]infer.Input{}
		for s := range dm.Slots {
			in["embedding_"+strconv.Itoa(s)+".tmp_0"] = infer.Input{Data: Embedding(k+uint64(s), 1, dm.Width), Dims: []int64{1, int64(dm.Width)}, LoD: []int64{0, 1}}
		}
		out, err := m.Run(in)
		if err != nil {
			t.Fatal(err)
		}
		p := out[DemoFetch].Data
		if len(p) != 2 || p[1] <= 0 || p[1] >= 1 || p[0]+p[1] < 0.999 || p[0]+p[1] > 1.001 {
			t.Fatalf("key %d: %v is not a softmax over [no click, click]", k, p)
		}
		seen[p[1]] = true
	}
	if len(seen) < 4 {
		t.Errorf("5 inputs gave %d probabilities: the embeddings do not move the model", len(seen))
	}
}

// GenOf reads the generation back from either layout WriteModel writes, and from nothing
// else.
func TestGenOf(t *testing.T) {
	for _, gen := range []byte{1, 2, 200} {
		for _, v := range [][]byte{Value(42, gen, 40), EmbeddingBytes(42, gen, 10)} {
			if g, ok := GenOf(42, v); !ok || g != gen {
				t.Errorf("generation %d: GenOf = %d, %v", gen, g, ok)
			}
			if _, ok := GenOf(43, v); ok {
				t.Errorf("generation %d: key 43 took key 42's value", gen)
			}
		}
	}
	if _, ok := GenOf(42, make([]byte, 40)); ok {
		t.Error("zeros are no generation's value")
	}
}
