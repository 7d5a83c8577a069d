// Package grafana holds the Grafana dashboard shipped with the provider (ctr-cube.json) and
// the test that keeps its queries true to the metrics the cube engine exports.
package grafana

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/elasticctr/terraform-provider-ctr/cube/server"
	"github.com/elasticctr/terraform-provider-ctr/cube/transfer"
	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
)

const dashboardFile = "ctr-cube.json"

// query is one PromQL expression of the dashboard and where it is.
type query struct{ at, expr string }

// queries are every PromQL expression of a dashboard: panels' targets and annotations
// ("expr"), and the selectors of query variables (label_values(<selector>, <label>),
// query_result(<expr>)).
func queries(raw []byte) ([]query, error) {
	var d map[string]any
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, err
	}
	var out []query
	var walk func(at string, v any) error
	walk = func(at string, v any) error {
		switch t := v.(type) {
		case map[string]any:
			if e, ok := t["expr"].(string); ok {
				out = append(out, query{at, e})
			}
			keys := make([]string, 0, len(t))
			for k := range t {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				if err := walk(at+"."+k, t[k]); err != nil {
					return err
				}
			}
		case []any:
			for i, e := range t {
				if err := walk(fmt.Sprintf("%s[%d]", at, i), e); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk("", d); err != nil {
		return nil, err
	}
	vars, _ := d["templating"].(map[string]any)
	list, _ := vars["list"].([]any)
	for i, v := range list {
		m, _ := v.(map[string]any)
		if m["type"] != "query" {
			continue
		}
		q, ok := m["query"].(string)
		if qm, isMap := m["query"].(map[string]any); isMap {
			q, ok = qm["query"].(string)
		}
		if !ok {
			return nil, fmt.Errorf("templating.list[%d] (%v): a query variable without a query string", i, m["name"])
		}
		expr, err := variableSelector(q)
		if err != nil {
			return nil, fmt.Errorf("templating.list[%d] (%v): %w", i, m["name"], err)
		}
		if expr != "" {
			out = append(out, query{fmt.Sprintf("templating.list[%d]", i), expr})
		}
	}
	return out, nil
}

// variableSelector is the PromQL inside a Grafana Prometheus variable query ("" when it
// selects no metric, as label_values(<label>) and label_names()).
func variableSelector(q string) (string, error) {
	q = strings.TrimSpace(q)
	fn, rest, ok := strings.Cut(q, "(")
	if !ok || !strings.HasSuffix(rest, ")") {
		return "", fmt.Errorf("%q is not a Grafana variable query of the Prometheus data source", q)
	}
	args := strings.TrimSuffix(rest, ")")
	switch strings.TrimSpace(fn) {
	case "label_values":
		// label_values(<selector>, <label>) or label_values(<label>): the label is the last argument.
		i := strings.LastIndex(args, ",")
		if i < 0 {
			return "", nil
		}
		return args[:i], nil
	case "query_result":
		return args, nil
	case "label_names":
		return "", nil
	}
	return "", fmt.Errorf("%q: only label_values, query_result and label_names can be checked", q)
}

// checkDashboard returns a problem for every query that cannot be read and every metric a
// query selects that serves does not know.
func checkDashboard(raw []byte, serves func(metric string) bool) ([]string, error) {
	qs, err := queries(raw)
	if err != nil {
		return nil, err
	}
	if len(qs) == 0 {
		return nil, fmt.Errorf("the dashboard has no queries")
	}
	var problems []string
	for _, q := range qs {
		names, err := metricNames(q.expr)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", q.at, err))
			continue
		}
		if len(names) == 0 {
			problems = append(problems, fmt.Sprintf("%s: %s selects no metric", q.at, q.expr))
		}
		for _, n := range names {
			if !serves(n) {
				problems = append(problems, fmt.Sprintf("%s: %s is not a metric the cube servers or the transfer export (in %s)", q.at, n, q.expr))
			}
		}
	}
	return problems, nil
}

// engineServes says whether a cube server or the transfer serves series of a name, from
// the metric families they register.
func engineServes(t *testing.T) func(string) bool {
	t.Helper()
	srv, err := server.MetricFamilies()
	if err != nil {
		t.Fatal(err)
	}
	tr, err := transfer.MetricFamilies()
	if err != nil {
		t.Fatal(err)
	}
	return func(n string) bool { return srv.Serves(n) || tr.Serves(n) }
}

// TestDashboard_QueriesOnlyExportedMetrics: every metric every query of the dashboard selects
// is one a cube server or the transfer registers (a histogram by its _bucket, _sum and _count
// series), and the dashboard shows what a team watches: lookups, misses, latency, the served
// version of each shard, rollouts and heals.
func TestDashboard_QueriesOnlyExportedMetrics(t *testing.T) {
	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	problems, err := checkDashboard(raw, engineServes(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
	qs, err := queries(raw)
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	for _, q := range qs {
		names, _ := metricNames(q.expr)
		for _, n := range names {
			used[n] = true
		}
	}
	for _, want := range []string{"cube_keys_total", "cube_key_misses_total", "cube_request_duration_seconds_bucket",
		"cube_dict_info", "cube_transfer_rollouts_total", "cube_transfer_heals_total"} {
		if !used[want] {
			t.Errorf("the dashboard queries no %s", want)
		}
	}
}

// TestDashboard_AWrongMetricFails: the same check finds a metric the engine does not export,
// a histogram queried by its bare name, and a query it cannot read.
func TestDashboard_AWrongMetricFails(t *testing.T) {
	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	serves := engineServes(t)
	for old, bad := range map[string]string{
		"cube_key_misses_total":                "cube_misses_total",
		"cube_request_duration_seconds_bucket": "cube_request_duration_seconds",
		"cube_transfer_heals_total":            "cube_transfer_heal_total",
		"[$__rate_interval]":                   "[$__rate_interval",
	} {
		if !strings.Contains(string(raw), old) {
			t.Fatalf("the dashboard has no %s to replace", old)
		}
		problems, err := checkDashboard([]byte(strings.ReplaceAll(string(raw), old, bad)), serves)
		if err != nil {
			t.Fatal(err)
		}
		if len(problems) == 0 {
			t.Errorf("%s in place of %s: no problem found", bad, old)
		} else if !strings.HasPrefix(bad, "[") && !strings.Contains(problems[0], bad+" is not a metric") {
			t.Errorf("%s in place of %s: %s", bad, old, problems[0])
		}
	}
}

// promLabel is the name Prometheus gives a Kubernetes label it copies onto series (a
// PodMonitor's podTargetLabels, a labelmap of pod labels): every character a label name
// cannot hold becomes '_'.
func promLabel(k8sLabel string) string {
	return strings.Map(func(r rune) rune {
		if r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			return r
		}
		return '_'
	}, k8sLabel)
}

// TestDashboard_SelectsACubeByTheLabelItsPodsCarry: the dashboard's cube variable lists, and
// every query of a panel or an annotation selects, the label that a rendered PodMonitor copies
// onto the series from the pods' instance label, so that one cube's series are shown.
func TestDashboard_SelectsACubeByTheLabelItsPodsCarry(t *testing.T) {
	if !slices.Contains(stack.PodMonitorTargetLabels, stack.LabelInstance) {
		t.Fatalf("a PodMonitor copies %v onto the series, not %s", stack.PodMonitorTargetLabels, stack.LabelInstance)
	}
	label := promLabel(stack.LabelInstance)
	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	qs, err := queries(raw)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range qs {
		if strings.HasPrefix(q.at, "templating") {
			continue
		}
		if !strings.Contains(q.expr, label+`=~"$cube"`) {
			t.Errorf("%s does not select the cube by %s: %s", q.at, label, q.expr)
		}
	}
	if !strings.Contains(string(raw), ", "+label+")") {
		t.Errorf("the cube variable does not list the values of %s", label)
	}
}
