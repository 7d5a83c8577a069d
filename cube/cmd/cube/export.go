package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/api"
	"github.com/elasticctr/terraform-provider-ctr/cube/bounded"
	"github.com/elasticctr/terraform-provider-ctr/cube/donefile"
	"github.com/elasticctr/terraform-provider-ctr/cube/modelout"
	"github.com/elasticctr/terraform-provider-ctr/cube/paddle"
)

// exportFormatHelp says what each of api.ExportFormats is (TestExportFormatsHaveHelp).
var exportFormatHelp = map[string]string{
	"lodtensor":    "one variable's LoDTensor file (Fluid save_persistables): key = row index, as EDL's and ElasticCTR's dumpers key SparseFeatFactors",
	"combined":     "a combined params file (__params__, *.pdiparams) and its program (--program): the tensor --var names; key = row index",
	"selectedrows": "a SelectedRows file (a distributed lookup table's rows): key = row id",
	"ps-table":     "a folder of Paddle 2.x parameter-server sparse-table text shards (CommonSparseTable *.blockN.txt + .meta, or MemorySparseTable part-*): key = feasign",
}

// exportSpec is what one export reads.
type exportSpec struct {
	format, varName, program, params string
	// servingModel is a serving model folder to publish with the version (relative to a
	// save folder in --watch mode).
	servingModel string
	layout       paddle.CtrLayout
}

// runExport is the model-output step: it turns what Paddle saved into the cube's input
// (SequenceFiles under data/<id>/ and a donefile line), with no Paddle installed, publishing
// all or nothing; with --watch it keeps doing so for every new save a trainer makes.
func runExport(fs flagSet, stdout, stderr io.Writer) error {
	names := api.ExportFormats
	var formats strings.Builder
	for _, n := range names {
		fmt.Fprintf(&formats, "\n  %s: %s", n, exportFormatHelp[n])
	}
	format := fs.String("format", "", "what --in holds:"+formats.String())
	in := fs.String("in", "", "the `path` Paddle saved: a variable's file, a folder holding it (with --var), a combined params file or its folder, a SelectedRows file, or a sparse table's shard folder; with --watch, the folder the trainer saves into (each sub-folder one save, e.g. pass-0)")
	out := fs.String("out", "", "model-output `directory` (what the training file server serves): writes data/<id>/part-NNNNN and appends donefile/base.txt (patch.txt)")
	sp := exportSpec{}
	fs.StringVar(&sp.varName, "var", "", "the embedding variable's `name` (e.g. SparseFeatFactors): the file in a saved folder, the tensor of a combined file, or (ps-table) the table's sub-folder of a save")
	fs.StringVar(&sp.program, "program", "", "the program `file` (__model__, *.pdmodel) a combined params file was saved with: its sorted persistable variables name the tensors (default: __model__ or the one *.pdmodel beside the params)")
	fs.StringVar(&sp.servingModel, "serving-model", "", "a serving model `folder` (what Paddle Serving loads) to publish with the version as serving/<id>/, so that dense and sparse carry one id; with --watch, relative to each save")
	fs.StringVar(&sp.params, "params", "", "combined: the params `file` name in a saved folder (default: __params__ or the one *.pdiparams)")
	id := fs.String("id", "", "donefile `id` of the version, above every id already there (default: unix seconds now, or one above the last id)")
	patchOf := fs.String("patch-of", "", "publish a patch of base `BASE_ID` (patch.txt) instead of a base")
	partBytes := fs.Int64("part-bytes", modelout.DefaultPartBytes, "start a new SequenceFile part after this many `bytes`")
	fs.IntVar(&sp.layout.EmbedxDim, "embedx-dim", -1, "ps-table MemorySparseTable: the accessor's embedx_dim (required for part-* shards)")
	fs.IntVar(&sp.layout.EmbedSGDDim, "embed-sgd-dim", 1, "ps-table MemorySparseTable: floats of embed_g2sum (1 for the naive and adagrad rules)")
	fs.IntVar(&sp.layout.EmbedxSGDDim, "embedx-sgd-dim", 1, "ps-table MemorySparseTable: floats of embedx_g2sum (1 for the naive and adagrad rules)")
	fs.BoolVar(&sp.layout.Pull, "pull", false, "ps-table MemorySparseTable: export what a trainer's pull returns (show, click, embed_w, embedx_w…) instead of embed_w, embedx_w…")
	watch := fs.Bool("watch", false, "keep watching --in: publish the newest save (sub-folder) once it has settled, as a new version each time it changes; never exits on a bad save")
	interval := fs.Duration("interval", 10*time.Second, "--watch: how often to look; a save is exported once it is unchanged over one interval")
	newLogger := logFlag(fs, "--watch: debug, info, warn or error")
	if err := fs.parse(); err != nil {
		return err
	}
	sp.format = *format
	if *in == "" || *out == "" || *format == "" {
		return errors.New("--format, --in and --out are required")
	}
	if !slices.Contains(names, sp.format) {
		return fmt.Errorf("--format %q: want one of %s", sp.format, strings.Join(names, ", "))
	}
	if *watch {
		if *id != "" || *patchOf != "" {
			return errors.New("--watch publishes bases with ids of its own: --id and --patch-of do not apply")
		}
		if *interval < 100*time.Millisecond {
			return fmt.Errorf("--interval %s: at least 100ms", *interval)
		}
		ctx, stop := untilSignal()
		defer stop()
		return watchExports(ctx, newLogger(stderr), sp, *in, *out, *partBytes, *interval)
	}
	res, err := exportOnce(sp, *in, *out, modelout.Version{ID: *id, PatchOf: *patchOf, PartBytes: *partBytes})
	if err != nil {
		return err
	}
	kind := "base.txt"
	if *patchOf != "" {
		kind = "patch.txt"
	}
	fmt.Fprintf(stdout, "version %s published to %s: %s\n", res.entry.ID, filepath.Join(*out, "data", res.entry.ID), res)
	fmt.Fprintf(stdout, "donefile/%s: {\"id\":%q,\"key\":%q,\"input\":%q}\n", kind, res.entry.ID, res.entry.Key, res.entry.Input)
	return nil
}

// exportResult is what one export did.
type exportResult struct {
	entry   donefile.Entry
	stats   modelout.Stats
	inBytes int64
	took    time.Duration
}

func (r exportResult) String() string {
	return fmt.Sprintf("%d rows of %d bytes in %d part(s); read %.1f MB in %s (%.0f MB/s, %.0f rows/s)",
		r.stats.Records, r.stats.Bytes/max(r.stats.Records, 1)-16, r.stats.Parts, float64(r.inBytes)/1e6, r.took.Round(time.Millisecond),
		float64(r.inBytes)/1e6/r.took.Seconds(), float64(r.stats.Records)/r.took.Seconds())
}

// exportOnce publishes what in holds as version v of out, or nothing.
func exportOnce(sp exportSpec, in, out string, v modelout.Version) (exportResult, error) {
	start := time.Now()
	w, err := modelout.Begin(out, v)
	if err != nil {
		return exportResult{}, err
	}
	var inBytes int64
	if sp.format == "ps-table" {
		dir := in
		if sp.varName != "" {
			if st, err := os.Stat(filepath.Join(in, sp.varName)); err == nil && st.IsDir() {
				dir = filepath.Join(in, sp.varName)
			}
		}
		inBytes, err = exportTable(w, dir, sp.layout)
	} else {
		inBytes, err = exportTensor(w, sp, in)
	}
	if err == nil && sp.servingModel != "" {
		err = w.AddServingModel(sp.servingModel)
	}
	if err != nil {
		w.Abort()
		return exportResult{}, fmt.Errorf("%w (nothing was published)", err)
	}
	e, err := w.Commit()
	if err != nil {
		return exportResult{}, err
	}
	return exportResult{entry: e, stats: w.Stats, inBytes: inBytes, took: time.Since(start)}, nil
}

func openPaddle(path string) (*paddle.File, *os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, nil, fmt.Errorf("%s: not a regular file", path)
	}
	return paddle.NewFile(path, f, st.Size()), f, nil
}

// exportTensor writes the rows of a tensor file; it returns the bytes read.
func exportTensor(w *modelout.Writer, sp exportSpec, in string) (int64, error) {
	format, varName, program := sp.format, sp.varName, sp.program
	if st, err := os.Stat(in); err == nil && st.IsDir() {
		dir := in
		if format == "combined" {
			if in, err = savedFile(dir, sp.params, "__params__", ".pdiparams", "params"); err != nil {
				return 0, err
			}
			if program, err = savedFile(dir, program, "__model__", ".pdmodel", "program"); err != nil {
				return 0, err
			}
		} else {
			if varName == "" {
				return 0, fmt.Errorf("--in %s is a folder: name the variable with --var (e.g. SparseFeatFactors)", in)
			}
			in = filepath.Join(dir, varName)
		}
	}
	pf, f, err := openPaddle(in)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var rows *paddle.RowReader
	var t paddle.Tensor
	switch format {
	case "lodtensor":
		if t, err = pf.LoDTensor(); err != nil {
			return 0, err
		}
		rows = pf.Rows(t)
	case "combined":
		if program == "" || varName == "" {
			return 0, errors.New("--format combined needs --program (the __model__ or .pdmodel file; found beside the params when --in is their folder) and --var (the embedding's name): a combined file stores no names")
		}
		b, err := bounded.ReadFile(program, paddle.MaxProgramBytes)
		if err != nil {
			return 0, err
		}
		vars, err := paddle.ProgramVars(b)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", program, err)
		}
		ts, err := pf.LoDTensors()
		if err != nil {
			return 0, err
		}
		byName, err := paddle.Named(pf, ts, paddle.PersistableNames(vars))
		if err != nil {
			return 0, err
		}
		var ok bool
		if t, ok = byName[varName]; !ok {
			return 0, fmt.Errorf("--var %s: not a persistable variable of %s", varName, program)
		}
		rows = pf.Rows(t)
	case "selectedrows":
		s, err := pf.SelectedRows()
		if err != nil {
			return 0, err
		}
		t = s.Value
		rows = pf.SelectedRowsRows(s)
	}
	if t.DType != paddle.FP32 {
		return 0, fmt.Errorf("%s: %s: Paddle Serving reads cube values as float32; export a FP32 table", in, t)
	}
	if len(t.Dims) < 2 || t.RowBytes() == 0 {
		return 0, fmt.Errorf("%s: %s: want a table of rows ([rows, width], width ≥ 1)", in, t)
	}
	for {
		k, v, err := rows.Next()
		if errors.Is(err, io.EOF) {
			return pf.Size(), nil
		}
		if err != nil {
			return 0, err
		}
		if err := w.Append(k, v); err != nil {
			return 0, err
		}
	}
}

// exportTable writes every shard of a parameter-server sparse table.
func exportTable(w *modelout.Writer, dir string, layout paddle.CtrLayout) (int64, error) {
	kind, shards, err := paddle.TableShards(dir)
	if err != nil {
		return 0, err
	}
	if kind == "memory" {
		if layout.EmbedxDim < 0 {
			return 0, fmt.Errorf("%s holds MemorySparseTable shards: give the accessor's --embedx-dim (and --embed-sgd-dim/--embedx-sgd-dim when not 1)", dir)
		}
		if err := layout.Check(); err != nil {
			return 0, err
		}
	}
	var total int64
	for _, s := range shards {
		if st, err := os.Stat(s); err == nil {
			total += st.Size()
		}
		if err := exportShard(w, kind, s, layout); err != nil {
			return 0, err
		}
	}
	return total, nil
}

func exportShard(w *modelout.Writer, kind, shard string, layout paddle.CtrLayout) error {
	r, err := paddle.OpenShard(shard)
	if err != nil {
		return err
	}
	defer r.Close()
	var rows paddle.TableRows
	if kind == "common" {
		b, err := bounded.ReadFile(paddle.CommonMetaPath(shard), 1<<20)
		if err != nil {
			return fmt.Errorf("%s: its meta: %w", shard, err)
		}
		meta, err := paddle.ParseCommonMeta(b)
		if err != nil {
			return fmt.Errorf("%s: %w", paddle.CommonMetaPath(shard), err)
		}
		rows = paddle.NewCommonRows(shard, r, meta)
	} else {
		rows = paddle.NewMemoryRows(shard, r, layout)
	}
	for {
		k, v, err := rows.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := w.Append(k, v); err != nil {
			return err
		}
	}
}

// savedFile finds a file of a saved folder: name (relative to dir unless absolute), else
// def, else the one file with suffix ext.
func savedFile(dir, name, def, ext, what string) (string, error) {
	if name != "" {
		if filepath.IsAbs(name) {
			return name, nil
		}
		return filepath.Join(dir, name), nil
	}
	if _, err := os.Stat(filepath.Join(dir, def)); err == nil {
		return filepath.Join(dir, def), nil
	}
	m, _ := filepath.Glob(filepath.Join(dir, "*"+ext))
	if len(m) != 1 {
		return "", fmt.Errorf("%s: no %s file (%s, or one *%s; %d found): name it with --%s", dir, what, def, ext, len(m), what)
	}
	return m[0], nil
}
