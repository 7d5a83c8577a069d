package server

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/elasticctr/terraform-provider-ctr/cube/metricnames"
)

// metrics are the Prometheus series of one server. Counters are resolved
// once (no label lookups per request).
type metrics struct {
	reg *prometheus.Registry

	requests                       *prometheus.CounterVec // cube_requests_total{protocol,result}
	rpcOK, rpcErr, httpOK, httpErr prometheus.Counter
	keys, misses, longValues       prometheus.Counter
	latency                        prometheus.Observer
	conns                          prometheus.Gauge
	rejectedConns                  *prometheus.CounterVec
	badFrames                      prometheus.Counter
	rpcTooMany, httpTooMany        prometheus.Counter     // cube_requests_total{result="too_many_keys"}
	closedConns                    *prometheus.CounterVec // cube_connections_closed_total{reason}
	acceptErrors                   prometheus.Counter
	dictFaults, dictCorrupt        prometheus.Counter
	heavyPaused                    prometheus.Counter // cube_heavy_paused_seconds_total

	info      *prometheus.GaugeVec // cube_dict_info{slot,version} 1
	mapped    prometheus.Gauge
	dictKeys  prometheus.Gauge
	swapCount prometheus.Counter
	agentOps  *prometheus.CounterVec // cube_agent_operations_total{op,result}
}

// readouts are the gauges read from the server when scraped.
type readouts struct {
	inflight  func() float64 // bytes of baidu_std frame bodies counted against --max-inflight-bytes
	unchecked func() float64 // bytes of dictionaries not yet checked against their checksums
	copied    func() float64 // bytes of dictionaries served from their copy in memory
	busy      func() float64 // client connections in the middle of a request
}

// newMetrics registers the series of shard.
func newMetrics(shard int, r readouts) *metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(runtimeCollectors()...)
	// Every series of the server's own has the shard's label.
	m := registerMetrics(prometheus.WrapRegistererWith(prometheus.Labels{"shard": strconv.Itoa(shard)}, reg), r)
	m.reg = reg
	return m
}

// runtimeCollectors are the Go runtime's and the process's series.
func runtimeCollectors() []prometheus.Collector {
	return []prometheus.Collector{collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})}
}

// MetricFamilies are the metric families a server exports at GET /metrics, by name, with
// their types (the server's own carry the label shard): what a dashboard may query. They
// come from the registration newMetrics makes, not from a list.
func MetricFamilies() (metricnames.Families, error) {
	return metricnames.Of(func(r prometheus.Registerer) {
		r.MustRegister(runtimeCollectors()...)
		zero := func() float64 { return 0 }
		registerMetrics(r, readouts{zero, zero, zero, zero})
	})
}

// registerMetrics makes and registers the server's own series on r.
func registerMetrics(r prometheus.Registerer, ro readouts) *metrics {
	// Every series is registered as it is made.
	f := promauto.With(r)
	counter := func(name, help string) prometheus.Counter {
		return f.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	}
	gauge := func(name, help string) prometheus.Gauge {
		return f.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
	}
	reqs := f.NewCounterVec(prometheus.CounterOpts{
		Name: "cube_requests_total", Help: "Seek requests served, by protocol and result: ok, error, and the refused: too_many_keys (--max-keys, or more than a --max-response-bytes response answers), too_large (the response reached --max-response-bytes), memory (--max-inflight-bytes), busy (a request of more than " + strconv.Itoa(HeavyKeys) + " keys found no turn within a second).",
	}, []string{"protocol", "result"})
	f.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "cube_inflight_frame_bytes", Help: "Bytes of baidu_std frame bodies counted against --max-inflight-bytes."}, ro.inflight)
	f.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "cube_dict_unchecked_bytes", Help: "Bytes of the current and background dictionaries not yet checked against their checksums: a block is checked the first time a lookup reads it, and by a pass in the background after the dictionary is opened."}, ro.unchecked)
	f.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "cube_dict_bytes_in_memory", Help: "Bytes of the current and background dictionaries served from their copy in anonymous memory (--in-memory): made in the background once a dictionary is checked; it is served from its file mapping until then."}, ro.copied)
	f.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "cube_connections_busy", Help: "Open client connections in the middle of a request (the others wait for one, and may be closed to make room for a new connection)."}, ro.busy)
	return &metrics{
		requests:    reqs,
		rpcOK:       reqs.WithLabelValues("baidu_std", "ok"),
		rpcErr:      reqs.WithLabelValues("baidu_std", "error"),
		httpOK:      reqs.WithLabelValues("http", "ok"),
		httpErr:     reqs.WithLabelValues("http", "error"),
		rpcTooMany:  reqs.WithLabelValues("baidu_std", "too_many_keys"),
		httpTooMany: reqs.WithLabelValues("http", "too_many_keys"),
		closedConns: f.NewCounterVec(prometheus.CounterOpts{
			Name: "cube_connections_closed_total",
			Help: "Connections closed by the server, by reason: silent (no first bytes within --header-timeout), idle (--idle-timeout), evicted (the longest idle, to admit a new connection over --max-conns or --max-conns-per-client), slow_frame (--read-timeout), slow_write (--write-timeout), memory (--max-inflight-bytes), bad_frame, error.",
		}, []string{"reason"}),
		acceptErrors: counter("cube_accept_errors_total", "Failed accepts (e.g. out of file descriptors), each retried after a backoff."),
		dictFaults:   counter("cube_dict_faults_total", "Dictionary versions retired because reading their mapping faulted (file truncated in place)."),
		dictCorrupt:  counter("cube_dict_corrupt_total", "Dictionary versions refused or retired because a block did not match its checksum: found by the first lookup reading it, the pass after opening, or the scrub (--scrub-interval)."),
		keys:         counter("cube_keys_total", "Keys looked up."),
		misses:       counter("cube_key_misses_total", "Keys not found (status 4294967295)."),
		longValues:   counter("cube_long_values_total", "Values over --max-value-size answered as misses."),
		heavyPaused: counter("cube_heavy_paused_seconds_total", "Time requests of more than "+strconv.Itoa(HeavyKeys)+
			" keys paused to keep within --heavy-cpu-share of the cores."),
		rejectedConns: f.NewCounterVec(prometheus.CounterOpts{
			Name: "cube_connections_rejected_total",
			Help: "Connections closed at accept, none idle to make room for them, by reason: max_conns (--max-conns), per_client (--max-conns-per-client).",
		}, []string{"reason"}),
		badFrames: counter("cube_bad_frames_total", "Malformed baidu_std frames (each closes its connection)."),
		swapCount: counter("cube_dict_changes_total", "Changes of the current or background dictionary."),
		conns:     gauge("cube_connections", "Open client connections."),
		mapped:    gauge("cube_dict_bytes_mapped", "Bytes of dictionary files mapped (current + background)."),
		dictKeys:  gauge("cube_dict_keys", "Keys in the current dictionary."),
		latency: f.NewHistogram(prometheus.HistogramOpts{
			Name: "cube_request_duration_seconds", Help: "Seek handling time, from decoded request to encoded response.",
			Buckets: prometheus.ExponentialBuckets(5e-6, 2, 16)}),
		info: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "cube_dict_info", Help: "1 for each loaded dictionary version, by slot (current, background)."},
			[]string{"slot", "version"}),
		agentOps: f.NewCounterVec(prometheus.CounterOpts{
			Name: "cube_agent_operations_total", Help: "Agent prepare/commit/abort/fence outcomes (a commit that arrived after its instant: result late)."}, []string{"op", "result"}),
	}
}
