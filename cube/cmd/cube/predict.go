package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/bounded"
	"github.com/elasticctr/terraform-provider-ctr/cube/paddle/servingpb"
	"github.com/elasticctr/terraform-provider-ctr/cube/predict"
	"github.com/elasticctr/terraform-provider-ctr/cube/samples"
	"github.com/elasticctr/terraform-provider-ctr/cube/servingconf"
)

// DefaultSparseDim is the embedding table's row count of ElasticCTR's trainers and of
// Serving's CTR-with-cube example (SPARSE_DIM, sparse_feature_dim): 1000001.
const DefaultSparseDim = 1000001

// runPredict sends sample lines to Paddle Serving's GeneralModelService and prints each
// line's click probability, as the seeds' users check a stack with elastic-control.sh -c.
func runPredict(fs flagSet, stdout, stderr io.Writer) error {
	addr := fs.String("addr", "", "the serving: `HOST:PORT` for baidu_std, or http://HOST:PORT for HTTP (e.g. ctr_serving's load_balancer_address)")
	conf := fs.String("conf", "", "the model's serving_client_conf.prototxt (or serving_server_conf.prototxt): its feeds decide the request, in order")
	format := fs.String("format", "elasticctr", "sample line format: elasticctr (\"show click feasign:slot ...\", needs --slots) or criteo (raw tab-separated Criteo lines)")
	slotsFile := fs.String("slots", "", "slot.conf: the slot ids the model's LoD feeds follow, in order (elasticctr)")
	sparseDim := fs.Uint64("sparse-dim", DefaultSparseDim, "rows of the embedding table: a key is feasign % `N` (0: feasigns as they are)")
	fetch := fs.String("fetch", "", "fetch alias to read (default: the conf's first fetch var); its rows are softmax [no click, click]")
	timeout := fs.Duration("timeout", 20*time.Second, "bound on each prediction")
	maxLatency := fs.Duration("max-latency", 0, "fail when a prediction takes longer (0: no bound)")
	repeatFor := fs.Duration("for", 0, "send the lines again and again until this `long` has passed (0: once); with --every, a steady load to watch a rollout through")
	every := fs.Duration("every", 0, "pause between two predictions")
	stamps := fs.Bool("timestamps", false, "print each probability after the Unix time in milliseconds its answer came")
	if err := fs.parse(); err != nil {
		return err
	}
	if *addr == "" || *conf == "" || fs.NArg() > 1 {
		fs.Usage()
		return errUsage
	}
	var model servingpb.GeneralModelConfig
	if err := servingconf.ReadText(*conf, &model); err != nil {
		return fmt.Errorf("--conf: %w", err)
	}
	if *fetch == "" {
		if len(model.GetFetchVar()) == 0 {
			return fmt.Errorf("--conf %s has no fetch_var", *conf)
		}
		*fetch = model.GetFetchVar()[0].GetAliasName()
	}
	var lineFormat samples.Format
	switch *format {
	case "criteo":
		lineFormat = samples.Criteo{}
	case "elasticctr":
		if *slotsFile == "" {
			return errors.New("--format elasticctr needs --slots (slot.conf)")
		}
		f, err := os.Open(*slotsFile)
		if err != nil {
			return err
		}
		slots, err := samples.ReadSlots(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("--slots: %w", err)
		}
		lineFormat = slots
	default:
		return fmt.Errorf("--format %q: elasticctr or criteo", *format)
	}
	in := io.Reader(os.Stdin)
	if fs.NArg() == 1 && fs.Arg(0) != "-" {
		f, err := os.Open(fs.Arg(0))
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	lines, err := bounded.ReadAll(in, maxPredictInput)
	if err != nil {
		return fmt.Errorf("the sample lines: %w", err)
	}
	client := predict.NewClient(*addr, *timeout)
	defer client.Close()
	var took []time.Duration
	start := time.Now()
	for pass := 0; err == nil && (pass == 0 || time.Since(start) < *repeatFor); pass++ {
		err = samples.Each(lineFormat, bytes.NewReader(lines), *sparseDim, func(n int, s samples.Sample) error {
			if pass > 0 && time.Since(start) >= *repeatFor {
				return errDone
			}
			req, err := predict.Request(&model, s.Keys, s.Dense, *fetch)
			if err != nil {
				return fmt.Errorf("line %d: %w", n, err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), *timeout)
			sent := time.Now()
			resp, err := client.Predict(ctx, req)
			d := time.Since(sent)
			cancel()
			if err != nil {
				return fmt.Errorf("line %d: %w", n, err)
			}
			probs, err := predict.Probabilities(resp)
			if err != nil {
				return fmt.Errorf("line %d: %w", n, err)
			}
			if *maxLatency > 0 && d > *maxLatency {
				return fmt.Errorf("line %d: the prediction took %s, more than --max-latency %s", n, d.Round(time.Microsecond), *maxLatency)
			}
			took = append(took, d)
			for _, p := range probs {
				if *stamps {
					fmt.Fprintf(stdout, "%d ", time.Now().UnixMilli())
				}
				fmt.Fprintf(stdout, "%.6f\n", p)
			}
			if *every > 0 {
				time.Sleep(*every)
			}
			return nil
		})
	}
	if errors.Is(err, errDone) {
		err = nil
	}
	if len(took) > 0 {
		fmt.Fprintf(stderr, "%s\n", latencySummary(took))
	}
	return err
}

// maxPredictInput bounds the sample lines cube predict reads (Serving's demo file is 241 KB).
const maxPredictInput = 256 << 20

// errDone ends a --for run at a line.
var errDone = errors.New("done")

// latencySummary is one line of prediction latencies: count, p50, p99 and max.
func latencySummary(took []time.Duration) string {
	s := slices.Clone(took)
	slices.Sort(s)
	at := func(q float64) time.Duration { return s[min(len(s)-1, int(q*float64(len(s))))] }
	var b strings.Builder
	fmt.Fprintf(&b, "%d predictions: p50 %s, p99 %s, max %s", len(s), at(0.5).Round(time.Microsecond), at(0.99).Round(time.Microsecond), s[len(s)-1].Round(time.Microsecond))
	return b.String()
}
