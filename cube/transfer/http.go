package transfer

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/elasticctr/terraform-provider-ctr/cube/api"
	"github.com/elasticctr/terraform-provider-ctr/cube/fileserver"
	"github.com/elasticctr/terraform-provider-ctr/cube/metricnames"
)

type metrics struct {
	reg              *prometheus.Registry
	rollouts         *prometheus.CounterVec
	donefileWarnings prometheus.Counter
	info             *prometheus.GaugeVec
	phase            prometheus.Gauge
	window           prometheus.Gauge
	duration         prometheus.Gauge
	heals            *prometheus.CounterVec
	replicas         *prometheus.GaugeVec
	clockOffset      *prometheus.GaugeVec
}

func newMetrics() *metrics {
	reg := prometheus.NewRegistry()
	m := registerMetrics(reg)
	m.reg = reg
	return m
}

// MetricFamilies are the metric families the transfer exports at GET /metrics, by name, with
// their types: what a dashboard may query. They come from the registration newMetrics makes,
// not from a list.
func MetricFamilies() (metricnames.Families, error) {
	return metricnames.Of(func(r prometheus.Registerer) { registerMetrics(r) })
}

// registerMetrics makes and registers the transfer's series on r, the Go runtime's and the
// process's among them.
func registerMetrics(r prometheus.Registerer) *metrics {
	r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Every series is registered as it is made.
	f := promauto.With(r)
	gauge := func(name, help string) prometheus.Gauge {
		return f.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
	}
	return &metrics{
		rollouts: f.NewCounterVec(prometheus.CounterOpts{Name: "cube_transfer_rollouts_total",
			Help: "Rollout attempts by result (served, failed)."}, []string{"result"}),
		donefileWarnings: f.NewCounter(prometheus.CounterOpts{Name: "cube_transfer_donefile_warnings_total",
			Help: "Donefile lines skipped (garbage, partial, an id not above the served one)."}),
		info: f.NewGaugeVec(prometheus.GaugeOpts{Name: "cube_transfer_served_version_info",
			Help: "1 for the version the transfer last rolled out to every replica (the one it heals replicas to)."}, []string{"version"}),
		phase:  gauge("cube_transfer_phase", "Rollout phase now: 0 idle/building, 1 preparing, 2 committing."),
		window: gauge("cube_transfer_switch_window_seconds", "Last rollout: first to last replica switching, on the transfer's clock (each corrected by its clock offset)."),
		clockOffset: f.NewGaugeVec(prometheus.GaugeOpts{Name: "cube_transfer_clock_offset_seconds",
			Help: "How far each replica's clock is ahead of the transfer's (negative: behind), from its last answer."}, []string{"replica"}),
		duration: gauge("cube_transfer_rollout_seconds", "Last rollout: donefile line seen to every replica serving."),
		heals: f.NewCounterVec(prometheus.CounterOpts{Name: "cube_transfer_heals_total",
			Help: "Replicas brought back to the decided version without a new model, by result (healed, failed)."}, []string{"result"}),
		replicas: f.NewGaugeVec(prometheus.GaugeOpts{Name: "cube_transfer_replicas",
			Help: "Replicas at the last heal pass, by state: serving the decided version, behind it, unreachable."}, []string{"state"}),
	}
}

func (m *metrics) served(v string) {
	m.info.Reset()
	if v != "" {
		m.info.WithLabelValues(v).Set(1)
	}
}

// Handlers returns the status API (GET /status, /healthz, /metrics, POST
// /trigger with the token) and the published versions under /files/
// (read-only, what agents download). With together, the API serves /files/
// as well and files is nil; apart, each can listen on its own port, so that
// a NetworkPolicy can let only cube servers download the model while the
// status stays readable by whoever runs the stack.
func (t *Transfer) Handlers(together bool) (status, files http.Handler, err error) {
	fh, err := fileserver.New(fileserver.Options{Root: t.outputDir(), Log: t.log})
	if err != nil {
		return nil, nil, err
	}
	fmux := http.NewServeMux()
	fmux.Handle("/files/", http.StripPrefix("/files", fh))
	fmux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux := http.NewServeMux()
	if together {
		mux.Handle("/files/", fmux)
	} else {
		files = fmux
	}
	mux.HandleFunc("GET "+api.StatusPath, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, t.Status(r.Context()))
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.Handle("GET "+api.MetricsPath, promhttp.HandlerFor(t.m.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("POST /trigger", func(w http.ResponseWriter, r *http.Request) {
		if !t.token.AcceptsRequest(r) {
			writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "need \"Authorization: Bearer <token>\""})
			return
		}
		t.Trigger()
		writeJSON(w, http.StatusAccepted, map[string]string{"status": "polling"})
	})
	return mux, files, nil
}

// Status asks every replica (in parallel, 1 s each) and reports them with
// the transfer's own state; the served version is what they report.
func (t *Transfer) Status(ctx context.Context) api.Status {
	st := t.snapshot()
	out := api.Status{Dict: t.opts.Dict, DecidedVersion: st.Served, Rollout: st.InFlight, History: st.History}
	t.mu.Lock()
	out.Skipped = t.skipped
	out.Pinned, out.PinError, out.Kept = t.opts.ServeVersion, t.pinErr, kept(st)
	for _, loc := range slices.Sorted(maps.Keys(t.unparsed)) {
		out.SkippedLines = append(out.SkippedLines, t.unparsed[loc]...)
	}
	t.mu.Unlock()
	if n := len(out.SkippedLines); n > api.MaxSkippedLines {
		out.SkippedLines = append(out.SkippedLines[:api.MaxSkippedLines-1], fmt.Sprintf("and %d more lines (the transfer's log names each)", n-api.MaxSkippedLines+1))
	}
	if n := len(out.History); n > 20 {
		out.History = out.History[n-20:]
	}
	if st.InFlight != nil {
		out.InFlight, out.Phase = st.InFlight.Version, st.InFlight.Phase
		if st.InFlight.Phase == api.PhaseFailed {
			// Not in flight any more: nothing will happen to it. Readers that wait
			// for "nothing in flight" (ctr_cube's re-shard) must not wait on it.
			out.InFlight = ""
			out.Error = fmt.Sprintf("version %s (donefile id %s) failed and is not tried again until a newer donefile line appears: %s",
				st.InFlight.Version, st.InFlight.ID, st.InFlight.LastError)
		}
	}
	v := t.replicaView()
	rs, reports, errs := v.rs, v.reports, v.errs
	out.RepliesAsOf = v.at
	out.Shards = make([]api.ShardStatus, t.shards())
	for s := range out.Shards {
		out.Shards[s].Shard = s
	}
	for i, rp := range rs {
		r := api.ReplicaStatus{Addr: rp.addr}
		if errs[i] != nil {
			r.State, r.Error = "unreachable", errs[i].Error()
		} else {
			a := reports[i]
			r.ServedVersion, r.State, r.Version, r.Error = a.ServedVersion, a.State, a.Version, a.Error
		}
		if why, ok := st.Fenced[rp.addr]; ok && r.ServedVersion != st.Served {
			r.State, r.Error = "fenced", why
		}
		if c, ok := t.clock(rp); ok {
			r.ClockOffsetUs, r.ClockUncertaintyUs = c.offset.Microseconds(), c.uncertainty.Microseconds()
		}
		out.Shards[rp.shard].Replicas = append(out.Shards[rp.shard].Replicas, r)
	}
	out.Summarize()
	return out
}

// Bounds of the transfer's HTTP listeners (cube transfer): connections
// served at once on each (--max-conns; more wait in the backlog), and the
// time a request, and an answer other than a version's files, may take.
const (
	DefaultMaxConns  = 1024
	HTTPReadTimeout  = 30 * time.Second
	HTTPWriteTimeout = 30 * time.Second
)

// GET /status is open to every pod, and each answer asks every replica (up
// to 8,192): the answers share one fan-out, at most statusTTL old, and one
// in flight at a time (concurrent requests wait for it); the fan-out takes
// at most statusDeadline, a replica that has not answered by then is
// unreachable.
const (
	statusTTL      = time.Second
	statusDeadline = 5 * time.Second
)

// replicas' answers to one fan-out.
type replicaAnswers struct {
	at      time.Time
	rs      []replica
	reports []api.AgentStatus
	errs    []error
}

// replicaView is the replicas' answers for GET /status (see statusTTL).
func (t *Transfer) replicaView() *replicaAnswers {
	t.viewMu.Lock()
	v := t.view
	t.viewMu.Unlock()
	if v != nil && time.Since(v.at) < statusTTL {
		return v
	}
	x, _, _ := t.viewFlight.Do("status", func() (any, error) {
		ctx, cancel := context.WithTimeout(context.Background(), statusDeadline)
		defer cancel()
		start := time.Now()
		rs := t.replicas()
		reports, errs := t.askAll(ctx, rs, time.Second)
		v := &replicaAnswers{at: start, rs: rs, reports: reports, errs: errs}
		t.viewMu.Lock()
		t.view = v
		t.viewMu.Unlock()
		return v, nil
	})
	return x.(*replicaAnswers)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
