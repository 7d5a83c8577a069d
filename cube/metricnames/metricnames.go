// Package metricnames lists the metric families a Prometheus registration makes, with their
// types: what a dashboard may query of a process, taken from the registration itself.
package metricnames

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Families are metric families by name, with their types.
type Families map[string]dto.MetricType

// Of runs register against a fresh registry and returns every family it registered. A family
// that has series (a counter, a gauge, a histogram, a vector with children) is read from the
// registry's Gather; a vector with no children yet (its labels are filled in as they happen:
// a version, a reason) gathers nothing, so it is named by its descriptor and typed by its
// kind of vector. register must hand Of's registerer the collectors themselves (wrap them
// with constant labels above it, not below), so that a vector shows as one.
func Of(register func(prometheus.Registerer)) (Families, error) {
	rec := &recorder{reg: prometheus.NewRegistry()}
	register(rec)
	gathered, err := rec.reg.Gather()
	if err != nil {
		return nil, err
	}
	out := Families{}
	for _, mf := range gathered {
		out[mf.GetName()] = mf.GetType()
	}
	for _, c := range rec.collectors {
		for _, d := range describe(c) {
			name, err := descName(d)
			if err != nil {
				return nil, err
			}
			if _, ok := out[name]; ok {
				continue
			}
			t, ok := vectorType(c)
			if !ok {
				return nil, fmt.Errorf("%s gathers nothing and is not a vector (%T): its type is unknown", name, c)
			}
			out[name] = t
		}
	}
	return out, nil
}

// Names are the families' names, sorted.
func (f Families) Names() []string {
	out := make([]string, 0, len(f))
	for n := range f {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Serves says whether a query may select series named name: a counter, gauge, summary or
// untyped family by its own name; a histogram by its _bucket, _sum and _count series (its
// own name has no series, these being classic histograms); a summary by its _sum and _count
// too.
func (f Families) Serves(name string) bool {
	if t, ok := f[name]; ok {
		return t != dto.MetricType_HISTOGRAM
	}
	for _, s := range []struct {
		suffix string
		types  []dto.MetricType
	}{
		{"_bucket", []dto.MetricType{dto.MetricType_HISTOGRAM}},
		{"_sum", []dto.MetricType{dto.MetricType_HISTOGRAM, dto.MetricType_SUMMARY}},
		{"_count", []dto.MetricType{dto.MetricType_HISTOGRAM, dto.MetricType_SUMMARY}},
	} {
		base, ok := strings.CutSuffix(name, s.suffix)
		if !ok {
			continue
		}
		if t, ok := f[base]; ok {
			for _, want := range s.types {
				if t == want {
					return true
				}
			}
		}
	}
	return false
}

// recorder registers on reg and remembers what it registered.
type recorder struct {
	reg        *prometheus.Registry
	collectors []prometheus.Collector
}

func (r *recorder) Register(c prometheus.Collector) error {
	if err := r.reg.Register(c); err != nil {
		return err
	}
	r.collectors = append(r.collectors, c)
	return nil
}

func (r *recorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

func (r *recorder) Unregister(c prometheus.Collector) bool { return r.reg.Unregister(c) }

func describe(c prometheus.Collector) []*prometheus.Desc {
	ch := make(chan *prometheus.Desc)
	go func() {
		c.Describe(ch)
		close(ch)
	}()
	var out []*prometheus.Desc
	for d := range ch {
		out = append(out, d)
	}
	return out
}

// descName is a descriptor's name. client_golang tells it only in the descriptor's String,
// `Desc{fqName: "<name>", help: ...}`: another form is an error, never a wrong name.
func descName(d *prometheus.Desc) (string, error) {
	s := d.String()
	const prefix = "Desc{fqName: "
	rest, ok := strings.CutPrefix(s, prefix)
	if !ok {
		return "", fmt.Errorf("metric descriptor %s: not of the form %s\"<name>\" and the rest", s, prefix)
	}
	q, err := strconv.QuotedPrefix(rest)
	if err != nil {
		return "", fmt.Errorf("metric descriptor %s: %w", s, err)
	}
	return strconv.Unquote(q)
}

// vectorType is the type of the series a vector makes.
func vectorType(c prometheus.Collector) (dto.MetricType, bool) {
	switch c.(type) {
	case *prometheus.CounterVec:
		return dto.MetricType_COUNTER, true
	case *prometheus.GaugeVec:
		return dto.MetricType_GAUGE, true
	case *prometheus.HistogramVec:
		return dto.MetricType_HISTOGRAM, true
	case *prometheus.SummaryVec:
		return dto.MetricType_SUMMARY, true
	}
	return 0, false
}
