package bench

import (
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
)

// spread is a figure over runs: the median and the range.
type spread struct{ med, lo, hi float64 }

// spreadOfValues sorts v and returns its median and range.
func spreadOfValues(v []float64) spread {
	slices.Sort(v)
	m := v[len(v)/2]
	if len(v)%2 == 0 {
		m = (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return spread{m, v[0], v[len(v)-1]}
}

func (s spread) format(verb string, scale float64) string {
	f := func(x float64) string { return fmt.Sprintf(verb, x/scale) }
	return fmt.Sprintf("%s [%s-%s]", f(s.med), f(s.lo), f(s.hi))
}

// row is one line of the comparison: a label, a figure of a run, and how
// to print it.
type row struct {
	label string
	f     func(Result) float64
	verb  string
	scale float64
}

var rows = []row{
	{"requests/s", Result.ReqPerSec, "%.0f", 1},
	{"keys/s", Result.KeysPerSec, "%.2fM", 1e6},
	{"p50 latency", func(r Result) float64 { return r.P50.Seconds() }, "%.3fms", 1e-3},
	{"p99 latency", func(r Result) float64 { return r.P99.Seconds() }, "%.3fms", 1e-3},
	{"server CPU s/Mkey", Result.CPUPerMKey, "%.4f", 1},
	{"load generator CPU us/request", Result.ClientCPUPerReq, "%.1f", 1},
}

func report(w io.Writer, o Options, systems []*system, rates []float64, serverCPUs, clientCPUs []int) {
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "median [min-max] of %d runs\t", o.Runs)
	for _, s := range systems {
		fmt.Fprintf(tw, "%s\t", s.name)
	}
	fmt.Fprintln(tw)
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t", r.label)
		for _, s := range systems {
			fmt.Fprintf(tw, "%s\t", spreadOf(s.runs, r.f).format(r.verb, r.scale))
		}
		fmt.Fprintln(tw)
	}
	fmt.Fprintf(tw, "errors\t")
	for _, s := range systems {
		n := int64(0)
		for _, r := range s.runs {
			n += r.Errors + r.Mismatches
		}
		fmt.Fprintf(tw, "%d\t", n)
	}
	fmt.Fprintln(tw)
	_ = tw.Flush()
	fmt.Fprintln(w)

	c := systems[0]
	keys := spreadOf(c.runs, Result.KeysPerSec)
	cpu := spreadOf(c.runs, Result.CPUPerMKey)
	in := spreadOfValues(slices.Clone(rates))
	share := make([]float64, len(rates)) // each cube run against the in-process round just before it
	for i, r := range rates {
		share[i] = 100 * c.runs[i].KeysPerSec() / r
	}
	sh := spreadOfValues(share)
	cores := len(serverCPUs)
	if cores > 0 {
		fmt.Fprintf(w, "in-process dictionary lookups: %s keys/s on the %d server CPU(s) %s (one 1s round before each cube run, %d goroutine(s), LookupBatch of %d keys drawn beforehand, values copied)\n",
			in.format("%.2fM", 1e6), cores, cpuList(serverCPUs), cores, o.Batch)
		fmt.Fprintf(w, "cube RPC keys/s = %s of the in-process rate on the same server CPU(s) (each run against the round before it; load generator on CPUs %s)\n",
			sh.format("%.1f%%", 1), cpuList(clientCPUs))
	} else {
		cores = runtime.NumCPU()
		fmt.Fprintf(w, "in-process dictionary lookups: %s keys/s (one 1s round before each cube run, %d goroutines, LookupBatch of %d keys drawn beforehand, values copied)\n",
			in.format("%.2fM", 1e6), runtime.GOMAXPROCS(0), o.Batch)
		fmt.Fprintf(w, "cube RPC keys/s = %s of the in-process rate (each run against the round before it; client and server share the same %d CPUs)\n",
			sh.format("%.1f%%", 1), runtime.NumCPU())
	}
	fmt.Fprintf(w, "cube server keys per CPU-second = %.2fM (in-process: %.2fM per CPU-second)\n", 1/cpu.med, in.med/1e6/float64(cores))
	if len(systems) < 2 {
		return
	}
	// The best peer on each axis: the most keys/s, the least CPU per key.
	fast, lean := systems[1], systems[1]
	for _, s := range systems[2:] {
		if spreadOf(s.runs, Result.KeysPerSec).med > spreadOf(fast.runs, Result.KeysPerSec).med {
			fast = s
		}
		if spreadOf(s.runs, Result.CPUPerMKey).med < spreadOf(lean.runs, Result.CPUPerMKey).med {
			lean = s
		}
	}
	fmt.Fprintf(w, "ratios of medians, cube against the best peer: keys/s against %s, server CPU per key against %s\n", fast.name, lean.name)
	fmt.Fprintf(w, "ratio keys_per_s=%.2f\n", keys.med/spreadOf(fast.runs, Result.KeysPerSec).med)
	fmt.Fprintf(w, "ratio cpu_per_mkey=%.3f\n", cpu.med/spreadOf(lean.runs, Result.CPUPerMKey).med)
}

// cpuList prints cpus as taskset's list.
func cpuList(cpus []int) string {
	s := make([]string, len(cpus))
	for i, c := range cpus {
		s[i] = fmt.Sprint(c)
	}
	return strings.Join(s, ",")
}
