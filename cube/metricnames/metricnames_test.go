package metricnames

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	dto "github.com/prometheus/client_model/go"
)

// TestOf_NamesEveryFamily: families with series and vectors without children are both named,
// each with its type; a vector wrapped with constant labels above the registerer still is.
func TestOf_NamesEveryFamily(t *testing.T) {
	fams, err := Of(func(r prometheus.Registerer) {
		f := promauto.With(r)
		f.NewCounter(prometheus.CounterOpts{Name: "c_total", Help: "h"})
		f.NewGauge(prometheus.GaugeOpts{Name: "g", Help: "h"})
		f.NewHistogram(prometheus.HistogramOpts{Name: "h_seconds", Help: "h"})
		f.NewSummary(prometheus.SummaryOpts{Name: "s_seconds", Help: "h"})
		f.NewCounterVec(prometheus.CounterOpts{Name: "cv_total", Help: "h"}, []string{"reason"})
		f.NewGaugeVec(prometheus.GaugeOpts{Name: "info", Help: "h"}, []string{"version"})
		f.NewHistogramVec(prometheus.HistogramOpts{Name: "hv_seconds", Help: "h"}, []string{"op"})
		f.NewSummaryVec(prometheus.SummaryOpts{Name: "sv_seconds", Help: "h"}, []string{"op"})
		f.NewGaugeFunc(prometheus.GaugeOpts{Name: "gf", Help: "h"}, func() float64 { return 1 })
	})
	if err != nil {
		t.Fatal(err)
	}
	want := Families{
		"c_total": dto.MetricType_COUNTER, "g": dto.MetricType_GAUGE, "h_seconds": dto.MetricType_HISTOGRAM,
		"s_seconds": dto.MetricType_SUMMARY, "cv_total": dto.MetricType_COUNTER, "info": dto.MetricType_GAUGE,
		"hv_seconds": dto.MetricType_HISTOGRAM, "sv_seconds": dto.MetricType_SUMMARY, "gf": dto.MetricType_GAUGE,
	}
	if len(fams) != len(want) {
		t.Errorf("families %v, want %v", fams.Names(), want.Names())
	}
	for n, typ := range want {
		if got, ok := fams[n]; !ok || got != typ {
			t.Errorf("%s: %v (listed: %v), want %v", n, got, ok, typ)
		}
	}
}

// TestOf_RefusesAnUntypeableCollector: a collector that describes a family and gathers
// nothing, and is no vector, is an error rather than a guess.
func TestOf_RefusesAnUntypeableCollector(t *testing.T) {
	_, err := Of(func(r prometheus.Registerer) { r.MustRegister(silent{prometheus.NewDesc("quiet", "h", nil, nil)}) })
	if err == nil {
		t.Fatal("a family of unknown type was listed")
	}
}

type silent struct{ d *prometheus.Desc }

func (s silent) Describe(ch chan<- *prometheus.Desc) { ch <- s.d }
func (silent) Collect(chan<- prometheus.Metric)      {}

// TestServes: a histogram is selected by its _bucket, _sum and _count series, never by its
// own name; a summary by its own, _sum and _count; the suffixes of other types select nothing.
func TestServes(t *testing.T) {
	f := Families{"h_seconds": dto.MetricType_HISTOGRAM, "s_seconds": dto.MetricType_SUMMARY,
		"c_total": dto.MetricType_COUNTER, "g": dto.MetricType_GAUGE}
	for name, want := range map[string]bool{
		"h_seconds_bucket": true, "h_seconds_sum": true, "h_seconds_count": true, "h_seconds": false,
		"s_seconds": true, "s_seconds_sum": true, "s_seconds_count": true, "s_seconds_bucket": false,
		"c_total": true, "c_total_count": false, "g": true, "g_sum": false, "g_bucket": false,
		"missing": false, "missing_bucket": false,
	} {
		if got := f.Serves(name); got != want {
			t.Errorf("Serves(%q) = %v, want %v", name, got, want)
		}
	}
}
