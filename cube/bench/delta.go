package bench

import (
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/api"
	"github.com/elasticctr/terraform-provider-ctr/cube/dict"
	"github.com/elasticctr/terraform-provider-ctr/cube/layers"
	"github.com/elasticctr/terraform-provider-ctr/cube/layout"
	"github.com/elasticctr/terraform-provider-ctr/cube/pipeline"
	"github.com/elasticctr/terraform-provider-ctr/cube/procstat"
	"github.com/elasticctr/terraform-provider-ctr/cube/transfer"
)

// DefaultDeltaBase is the delta table's base keys (ScaleOptions.DeltaBase),
// before ScaleOptions.Scale.
const DefaultDeltaBase = 10_000_000

// DefaultDeltaPatches are the patch sizes of the delta table.
func DefaultDeltaPatches() []int { return []int{1_000, 10_000, 100_000} }

// deltaRow is one patch rolled out one way.
type deltaRow struct {
	version string
	keys    int
	layered bool
	rec     rolloutRec
	shipped int64 // bytes the agents fetched: the version's shard files × replicas
	rssKiB  int64 // the transfer's peak RSS (it builds in-process), started afresh for the row
}

func (r deltaRow) how() string {
	if r.layered {
		return "layer"
	}
	return "full rebuild"
}

// deltaTable rolls patches of each size out over a base, in full (base +
// patch rebuilt, as with --max-layers 0) and as a layer, then measures
// lookups with transfer.DefaultMaxLayers layers against the version under
// them.
func deltaTable(o ScaleOptions, work string, w io.Writer) error {
	base := o.DeltaBase
	c, err := pipeline.Start(pipeline.Options{Bin: o.CubeBinary, Dir: filepath.Join(work, "delta"), Shards: 2, Replicas: o.Replicas,
		Keys: base, ValueSize: valueSize, Poll: 50 * time.Millisecond, HealInterval: o.HealInterval})
	if c != nil {
		defer c.Close()
	}
	if err != nil {
		return err
	}
	var own []string
	c.Transfer.SetArgs(func(a []string) []string { own = slices.Clone(a); return a })
	restart := func(maxLayers int) error {
		c.Transfer.Kill()
		c.Transfer.SetArgs(func([]string) []string { return append(slices.Clone(own), "--max-layers", strconv.Itoa(maxLayers)) })
		return c.Transfer.Start()
	}
	out := filepath.Join(c.Dir, "transfer", "output")
	id := time.Now().Unix()
	baseID := strconv.FormatInt(id, 10)
	if err := c.Publish(baseID, 1, ""); err != nil {
		return err
	}
	if _, err := c.WaitServed(baseID, 30*time.Minute); err != nil {
		return err
	}
	gen := byte(1)
	patch := func(keys int, maxLayers int) (deltaRow, error) {
		if err := restart(maxLayers); err != nil {
			return deltaRow{}, err
		}
		id++
		gen++
		pid := strconv.FormatInt(id, 10)
		start := time.Now()
		m := pipeline.Model{ID: pid, Gen: gen, PatchOf: baseID, Keys: base, PatchKeys: keys, ValueSize: valueSize}
		if err := c.PublishModel(m); err != nil {
			return deltaRow{}, err
		}
		rec, err := c.WaitServed(pid, 30*time.Minute)
		if err != nil {
			return deltaRow{}, err
		}
		// The patch's own record: a merge of layers that followed it at once
		// has the same id.
		st, err := c.Status()
		if err != nil {
			return deltaRow{}, err
		}
		if i := slices.IndexFunc(st.History, func(h api.Record) bool { return h.ID == pid && h.Result == "served" }); i >= 0 {
			rec = st.History[i]
		}
		row := deltaRow{version: rec.Version, keys: keys, rec: rolloutRec{float64(rec.TotalMs), float64(rec.DownloadMs), float64(rec.BuildMs),
			float64(rec.DistribMs), float64(rec.LoadMs), float64(rec.SwitchMs), ms(time.Since(start))}}
		man, err := layout.ReadManifest(out, rec.Version)
		if err != nil {
			return row, err
		}
		row.layered = man.Layered
		for _, s := range man.Shards {
			row.shipped += s.Size * int64(o.Replicas)
		}
		row.rssKiB, err = procstat.KiB(c.Transfer.PID(), "VmHWM")
		return row, err
	}
	var rows []deltaRow
	for _, k := range DefaultDeltaPatches() {
		k = min(k, base/pipeline.PatchStride)
		for _, maxLayers := range []int{0, transfer.DefaultMaxLayers} {
			row, err := patch(k, maxLayers)
			if err != nil {
				return fmt.Errorf("patch of %d keys: %w", k, err)
			}
			rows = append(rows, row)
		}
	}
	// Lookups with every layer the transfer allows, over the full version
	// the last full rebuild left (a patch of the first size each).
	n := transfer.DefaultMaxLayers
	if _, err := patch(DefaultDeltaPatches()[0], 0); err != nil {
		return err
	}
	// The n-th layer is then merged in the background; its layered version
	// stays on the replicas as the previous one.
	layerKeys := min(DefaultDeltaPatches()[1], base/pipeline.PatchStride)
	var top deltaRow
	for range n {
		if top, err = patch(layerKeys, n); err != nil {
			return err
		}
	}
	// Measure once the transfer has merged them and gone quiet: its build and
	// the agents' downloads would share the CPUs with the measurement.
	for deadline := time.Now().Add(30 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		st, err := c.Status()
		if err == nil && st.ServedVersion != top.version && st.InFlight == "" && len(st.Lagging()) == 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the %d layers were not merged within 30 minutes", n)
		}
	}
	single, layered, depth, err := layerLookups(o, c.DataDir(0, 0), top.version, base)
	if err != nil {
		return err
	}

	fmt.Fprintf(w, "\ndelta against full rebuild: base %d keys x %d B, 2 shards x %d replicas; a patch of k keys rolled out as a full rebuild (base + patch, --max-layers 0) and as a layer (its keys alone, --max-layers %d); file server, transfer and servers are real processes on all CPUs (unpinned); shipped: the version's shard files x replicas; transfer RSS: its peak (it builds in-process), restarted for each row\n",
		base, valueSize, o.Replicas, transfer.DefaultMaxLayers)
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "patch keys\tbuilt as\tshipped MB\tbuild ms\tdistribution ms\tload ms\tswitch ms\tline->serving ms\ttransfer RSS MiB\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%d\t%s\t%.2f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t\n", r.keys, r.how(), float64(r.shipped)/1e6, r.rec.build,
			r.rec.distrib, r.rec.load, r.rec.switchMs, r.rec.wall, float64(r.rssKiB)/1024)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "lookups in-process (shard 0, pinned to CPUs %s): %.2fM keys/s on the full version, %.2fM keys/s with %d layers of %d keys over it\n",
		o.ServerCPUs, single/1e6, layered/1e6, depth-1, layerKeys)
	for i := 0; i+1 < len(rows); i += 2 {
		full, layer := rows[i], rows[i+1]
		if full.keys == 10_000 && !full.layered && layer.layered {
			fmt.Fprintf(w, "ratio delta_10k_vs_full=%.3f\n", layer.rec.wall/full.rec.wall)
			fmt.Fprintf(w, "ratio delta_10k_shipped_vs_full=%.4f\n", float64(layer.shipped)/float64(full.shipped))
		}
	}
	fmt.Fprintf(w, "ratio lookups_%d_layers_vs_none=%.2f\n", depth-1, layered/single)
	return nil
}

// layerLookups measures in-process lookups of version (pinned to the server
// CPUs, the median of three one-second rounds) with its layers and of the
// full version under them alone; depth is the versions of its chain.
func layerLookups(o ScaleOptions, data, version string, keys int) (single, layered float64, depth int, err error) {
	chain, err := layers.Chain(data, version)
	if err != nil {
		return 0, 0, 0, err
	}
	cpus, _ := parseCPUList(o.ServerCPUs)
	bo := Options{Keys: keys, ValueSize: valueSize, Batch: o.Batch}
	rate := func(v string) (float64, error) {
		st, err := layers.Open(data, v, 0, dict.Options{})
		if err != nil {
			return 0, err
		}
		defer st.Close()
		if len(cpus) > 0 {
			if err := pinSelf(cpus); err != nil {
				return 0, err
			}
			defer func() { _ = pinSelf(nil) }()
		}
		rates := make([]float64, 3)
		for i := range rates {
			rates[i] = lookupRound(st, bo, uint64(i), time.Second)
		}
		return spreadOfValues(rates).med, nil
	}
	if single, err = rate(chain[len(chain)-1]); err != nil {
		return 0, 0, 0, err
	}
	layered, err = rate(version)
	return single, layered, len(chain), err
}
