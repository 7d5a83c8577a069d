package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/paddle"
	"github.com/elasticctr/terraform-provider-ctr/cube/pipeline"
)

// runModel writes a synthetic model as a trainer would: what a smoke test of
// a fresh cube deployment needs, without Paddle or a GPU.
func runModel(fs flagSet, stdout, stderr io.Writer) error {
	out := fs.String("out", "", "model-output `directory` (what the training file server serves): writes data/<id>/part-00000 and appends donefile/base.txt (patch.txt)")
	id := fs.String("id", "", "donefile `id` of the version (default: unix seconds now)")
	keys := fs.Int("keys", 100_000, "keys 0..`N`-1 (a patch holds every third)")
	size := fs.Int("value-size", pipeline.DefaultValueSize, "`bytes` per value: the key (8 bytes, little-endian), then the generation byte repeated")
	gen := fs.Int("gen", 1, "generation `G` (1-255) every value carries, so that a lookup can tell versions apart (cube seek --check G)")
	patchOf := fs.String("patch-of", "", "write a patch of base `BASE_ID` (patch.txt) instead of a base")
	format := fs.String("format", "seqfile", "seqfile: what the cube reads, with its donefile line; lodtensor: what Paddle saves, an FP32 [N, B/4] LoDTensor named --var in --out (no donefile: `cube export` makes the version)")
	varName := fs.String("var", "SparseFeatFactors", "lodtensor: the variable's `name`, its file name")
	embedding := fs.Bool("embedding", false, "seqfile: values are float32 embeddings of --value-size/4 that a model can use (pipeline.Embedding of the key and generation), not the key and generation bytes")
	servingModel := fs.String("serving-model", "", "seqfile: a serving model `folder` to publish with the version (serving/<id>/ and serving/<id>.tar.gz, before the donefile line)")
	if err := fs.parse(); err != nil {
		return err
	}
	if *format == "lodtensor" {
		return writeLoDTensorModel(*out, *varName, *keys, *size, *gen, stdout)
	} else if *format != "seqfile" {
		return fmt.Errorf("--format %q: want seqfile or lodtensor", *format)
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
	m := pipeline.Model{ID: *id, Gen: byte(*gen), PatchOf: *patchOf, Keys: *keys, ValueSize: *size, Embedding: *embedding, ServingModel: *servingModel}
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

// writeLoDTensorModel saves an embedding table as Paddle's save_persistables does: one
// LoDTensor file named after the variable, FP32 [keys, size/4], row r holding
// pipeline.Value(r, gen, size) — what `cube seek --check` verifies once it is served under
// its row index.
func writeLoDTensorModel(dir, name string, keys, size, gen int, stdout io.Writer) error {
	if dir == "" || name == "" {
		return errors.New("--out and --var are required")
	}
	if size < 12 || size%4 != 0 {
		return fmt.Errorf("--value-size %d: a row of float32s holds a multiple of 4 bytes, at least 12", size)
	}
	if gen < 1 || gen > 255 || keys < 1 {
		return fmt.Errorf("--gen %d, --keys %d: want 1-255 and at least 1", gen, keys)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	path := filepath.Join(dir, name)
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	_, _ = w.Write(paddle.AppendLoDTensorHeader(nil, paddle.FP32, []int64{int64(keys), int64(size / 4)}, nil))
	for k := range keys {
		_, _ = w.Write(pipeline.Value(uint64(k), byte(gen), size)) // bufio errors are sticky: Flush reports them
	}
	err = w.Flush()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	fmt.Fprintf(stdout, "saved %s as Paddle does: a LoDTensor, FP32 [%d, %d], generation %d\n", path, keys, size/4, gen)
	return nil
}
