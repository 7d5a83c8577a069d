package main

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/pipeline"
)

// runModel writes a synthetic model as a trainer would: what a smoke test of
// a fresh cube deployment needs, without Paddle or a GPU.
func runModel(args []string, stdout, stderr io.Writer) error {
	fs := flags("model", "--out DIR [--id ID] [--keys N] [--value-size B] [--gen G] [--patch-of BASE_ID]", stdout, stderr)
	out := fs.String("out", "", "model-output `directory` (what the training file server serves): writes data/<id>/part-00000 and appends donefile/base.txt (patch.txt)")
	id := fs.String("id", "", "donefile `id` of the version (default: unix seconds now)")
	keys := fs.Int("keys", 100_000, "keys 0..`N`-1 (a patch holds every third)")
	size := fs.Int("value-size", pipeline.DefaultValueSize, "`bytes` per value: the key (8 bytes, little-endian), then the generation byte repeated")
	gen := fs.Int("gen", 1, "generation `G` (1-255) every value carries, so that a lookup can tell versions apart (cube seek --check G)")
	patchOf := fs.String("patch-of", "", "write a patch of base `BASE_ID` (patch.txt) instead of a base")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *out == "" {
		return errors.New("--out is required")
	}
	if *gen < 1 || *gen > 255 {
		return fmt.Errorf("--gen %d: want 1-255", *gen)
	}
	if *keys < 1 {
		return fmt.Errorf("--keys %d: want at least 1", *keys)
	}
	if *id == "" {
		*id = strconv.FormatInt(time.Now().Unix(), 10)
	}
	m := pipeline.Model{ID: *id, Gen: byte(*gen), PatchOf: *patchOf, Keys: *keys, ValueSize: *size}
	if err := pipeline.WriteModel(*out, m); err != nil {
		return err
	}
	kind := "base.txt"
	if m.PatchOf != "" {
		kind = "patch.txt (base " + m.PatchOf + ")"
	}
	fmt.Fprintf(stdout, "model %s written to %s: %d keys × %d bytes, generation %d; line appended to donefile/%s\n",
		m.ID, *out, m.Keys, m.ValueSize, m.Gen, kind)
	return nil
}
