package server

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are the Prometheus series of one server. Counters are resolved
// once (no label lookups per request).
type metrics struct {
	reg *prometheus.Registry

	rpcOK, rpcErr, httpOK, httpErr prometheus.Counter
	keys, misses, longValues       prometheus.Counter
	latency                        prometheus.Observer
	conns                          prometheus.Gauge
	rejectedConns                  prometheus.Counter
	badFrames                      prometheus.Counter

	info      *prometheus.GaugeVec // cube_dict_info{slot,version} 1
	mapped    prometheus.Gauge
	dictKeys  prometheus.Gauge
	swapCount prometheus.Counter
	agentOps  *prometheus.CounterVec // cube_agent_operations_total{op,result}
}

func newMetrics(shard int) *metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	f := prometheus.WrapRegistererWith(prometheus.Labels{"shard": itoa(shard)}, reg)
	reqs := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cube_requests_total", Help: "Seek requests served, by protocol and result.",
	}, []string{"protocol", "result"})
	m := &metrics{
		reg:     reg,
		rpcOK:   reqs.WithLabelValues("baidu_std", "ok"),
		rpcErr:  reqs.WithLabelValues("baidu_std", "error"),
		httpOK:  reqs.WithLabelValues("http", "ok"),
		httpErr: reqs.WithLabelValues("http", "error"),
		keys: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cube_keys_total", Help: "Keys looked up."}),
		misses: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cube_key_misses_total", Help: "Keys not found (status 4294967295)."}),
		longValues: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cube_long_values_total", Help: "Values over --max-value-size answered as misses."}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "cube_request_duration_seconds", Help: "Seek handling time, from decoded request to encoded response.",
			Buckets: prometheus.ExponentialBuckets(5e-6, 2, 16)}),
		conns: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "cube_connections", Help: "Open client connections."}),
		rejectedConns: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cube_connections_rejected_total", Help: "Connections closed at accept because of --max-conns."}),
		badFrames: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cube_bad_frames_total", Help: "Malformed baidu_std frames (each closes its connection)."}),
		info: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "cube_dict_info", Help: "1 for each loaded dictionary version, by slot (current, background)."},
			[]string{"slot", "version"}),
		mapped: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "cube_dict_bytes_mapped", Help: "Bytes of dictionary files mapped (current + background)."}),
		dictKeys: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "cube_dict_keys", Help: "Keys in the current dictionary."}),
		swapCount: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cube_dict_changes_total", Help: "Changes of the current or background dictionary."}),
		agentOps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cube_agent_operations_total", Help: "Agent prepare/commit/abort outcomes."}, []string{"op", "result"}),
	}
	f.MustRegister(reqs, m.keys, m.misses, m.longValues, m.latency.(prometheus.Histogram), m.conns,
		m.rejectedConns, m.badFrames, m.info, m.mapped, m.dictKeys, m.swapCount, m.agentOps)
	return m
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b [20]byte
	n := len(b)
	neg := i < 0
	if neg {
		i = -i
	}
	for i > 0 {
		n--
		b[n] = byte('0' + i%10)
		i /= 10
	}
	if neg {
		n--
		b[n] = '-'
	}
	return string(b[n:])
}
