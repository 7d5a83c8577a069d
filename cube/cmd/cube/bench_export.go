package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/bench"
)

// runBenchExport measures the model-output step (`cube export`) on tables of growing size
// saved as Paddle saves them: its throughput (MB/s of LoDTensor input, rows/s) and its peak
// memory, which must stay flat as the table grows (rows are streamed, never held).
func runBenchExport(fs flagSet, stdout, stderr io.Writer) error {
	rowsFlag := fs.String("rows", "1000000,10000000", "table sizes in `rows`, comma-separated")
	width := fs.Int("width", 10, "float32s per row (EDL's SparseFeatFactors has 10, ElasticCTR's 9)")
	work := fs.String("work-dir", "", "where the tables and outputs go (default: a removed temp dir)")
	if err := fs.parse(); err != nil {
		return err
	}
	sizes, err := intList("--rows", *rowsFlag)
	if err != nil {
		return err
	}
	self, dir, cleanup, err := workspace(*work, "cube-bench-export-")
	if err != nil {
		return err
	}
	defer cleanup()
	fmt.Fprintf(stdout, "%-12s %10s %9s %9s %12s %14s\n", "rows", "input MB", "seconds", "MB/s", "rows/s", "peak RSS MiB")
	var rss []int64
	var rates []float64
	for _, n := range sizes {
		save := filepath.Join(dir, fmt.Sprintf("save-%d", n))
		if err := writeLoDTensorModel(save, "SparseFeatFactors", n, 4**width, 1, io.Discard); err != nil {
			return err
		}
		in := filepath.Join(save, "SparseFeatFactors")
		st, err := os.Stat(in)
		if err != nil {
			return err
		}
		out := filepath.Join(dir, fmt.Sprintf("out-%d", n))
		cmd := exec.Command(self, "export", "--format", "lodtensor", "--in", in, "--out", out)
		cmd.Stderr = stderr
		start := time.Now()
		peak, err := bench.RunPeakRSS(cmd) // not getrusage: it carries this process's peak into the child's
		if err != nil {
			return fmt.Errorf("cube export of %d rows: %w", n, err)
		}
		took := time.Since(start)
		mb := float64(st.Size()) / 1e6
		rss = append(rss, peak)
		rates = append(rates, float64(n)/took.Seconds())
		fmt.Fprintf(stdout, "%-12d %10.1f %9.2f %9.0f %12.0f %14.1f\n", n, mb, took.Seconds(), mb/took.Seconds(), float64(n)/took.Seconds(), float64(peak)/1024)
		os.RemoveAll(save)
		os.RemoveAll(out)
	}
	if len(sizes) > 1 {
		last := len(sizes) - 1
		fmt.Fprintf(stdout, "ratio export_rss_%s_vs_%s=%.2f\n", short(sizes[last]), short(sizes[0]), float64(rss[last])/float64(rss[0]))
		fmt.Fprintf(stdout, "ratio export_rows_per_s_%s_vs_%s=%.2f\n", short(sizes[last]), short(sizes[0]), rates[last]/rates[0])
	}
	return nil
}

// short writes a row count as 1m, 10m, 500k.
func short(n int) string {
	switch {
	case n%1_000_000 == 0:
		return strconv.Itoa(n/1_000_000) + "m"
	case n%1000 == 0:
		return strconv.Itoa(n/1000) + "k"
	}
	return strconv.Itoa(n)
}
