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
	rpcTooMany, httpTooMany        prometheus.Counter     // cube_requests_total{result="too_many_keys"}
	closedConns                    *prometheus.CounterVec // cube_connections_closed_total{reason}
	acceptErrors                   prometheus.Counter
	dictFaults                     prometheus.Counter

	info      *prometheus.GaugeVec // cube_dict_info{slot,version} 1
	mapped    prometheus.Gauge
	dictKeys  prometheus.Gauge
	swapCount prometheus.Counter
	agentOps  *prometheus.CounterVec // cube_agent_operations_total{op,result}
}

// newMetrics registers the series of shard; inflight reports the bytes of
// baidu_std frame bodies counted against --max-inflight-bytes.
func newMetrics(shard int, inflight func() float64) *metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	f := prometheus.WrapRegistererWith(prometheus.Labels{"shard": itoa(shard)}, reg)
	reqs := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cube_requests_total", Help: "Seek requests served, by protocol and result.",
	}, []string{"protocol", "result"})
	m := &metrics{
		reg:         reg,
		rpcOK:       reqs.WithLabelValues("baidu_std", "ok"),
		rpcErr:      reqs.WithLabelValues("baidu_std", "error"),
		httpOK:      reqs.WithLabelValues("http", "ok"),
		httpErr:     reqs.WithLabelValues("http", "error"),
		rpcTooMany:  reqs.WithLabelValues("baidu_std", "too_many_keys"),
		httpTooMany: reqs.WithLabelValues("http", "too_many_keys"),
		closedConns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cube_connections_closed_total",
			Help: "Connections closed by the server, by reason: silent (no first bytes within --header-timeout), idle (--idle-timeout), slow_frame (--read-timeout), slow_write (--write-timeout), memory (--max-inflight-bytes), bad_frame, error.",
		}, []string{"reason"}),
		acceptErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cube_accept_errors_total", Help: "Failed accepts (e.g. out of file descriptors), each retried after a backoff."}),
		dictFaults: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cube_dict_faults_total", Help: "Dictionary versions retired because reading their mapping faulted (file truncated in place)."}),
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
	inflightGauge := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "cube_inflight_frame_bytes", Help: "Bytes of baidu_std frame bodies counted against --max-inflight-bytes."}, inflight)
	f.MustRegister(reqs, m.keys, m.misses, m.longValues, m.latency.(prometheus.Histogram), m.conns,
		m.rejectedConns, m.badFrames, m.info, m.mapped, m.dictKeys, m.swapCount, m.agentOps,
		m.closedConns, m.acceptErrors, m.dictFaults, inflightGauge)
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
