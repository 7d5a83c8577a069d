package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
)

// Project returns the live object cut down to the fields the desired object sets. Fields the
// server adds (defaults, status, managedFields) disappear; fields we set show their live
// value, or are missing when someone removed them. Rendering the projection the same way as
// the desired object therefore gives identical YAML when there is no drift, and a
// field-level diff when there is.
//
// Lists of maps are matched by "name" when every desired element has one (containers, env,
// ports, volumes, tasks), else by position.
func Project(desired, live *unstructured.Unstructured) *unstructured.Unstructured {
	out := projectMap(desired.Object, live.Object)
	if desired.GetKind() == "Secret" && desired.GetAPIVersion() == "v1" {
		markSecretDrift(desired.Object, live.Object, out)
	}
	if desired.GetKind() == "StatefulSet" {
		markUnfinishedRollout(desired, live, out)
	}
	return &unstructured.Unstructured{Object: out}
}

// UnfinishedRolloutField is the field of a projected StatefulSet that says that some of its
// pods run an older revision of its template, which no controller replaces (update strategy
// OnDelete: RollOut does, and an apply that stopped half-way left them).
const UnfinishedRolloutField = "ctr-rollout"

// markUnfinishedRollout adds status.ctr-rollout to the projection of a StatefulSet whose
// desired update strategy is OnDelete and whose controller, at the current generation, counts
// pods of an older revision: the plan shows it as drift, and the apply's RollOut replaces
// them.
func markUnfinishedRollout(desired, live *unstructured.Unstructured, out map[string]any) {
	strategy, _, _ := unstructured.NestedString(desired.Object, "spec", "updateStrategy", "type")
	if strategy != "OnDelete" {
		return
	}
	current, _ := rollout(live)
	pods, _, _ := unstructured.NestedInt64(live.Object, "status", "replicas")
	updated, _, _ := unstructured.NestedInt64(live.Object, "status", "updatedReplicas")
	if !current || updated >= pods {
		return
	}
	out["status"] = map[string]any{UnfinishedRolloutField: fmt.Sprintf(
		"%d of %d pods run an older revision of the pod template; apply replaces them one replica at a time", pods-updated, pods)}
}

func projectMap(desired, live map[string]any) map[string]any {
	out := map[string]any{}
	for k, dv := range desired {
		lv, ok := live[k]
		if !ok {
			continue
		}
		if p, keep := projectValue(dv, lv); keep {
			out[k] = p
		}
	}
	return out
}

func projectValue(dv, lv any) (any, bool) {
	switch d := dv.(type) {
	case map[string]any:
		l, ok := lv.(map[string]any)
		if !ok {
			return lv, true
		}
		return projectMap(d, l), true
	case []any:
		l, ok := lv.([]any)
		if !ok {
			return lv, true
		}
		return projectList(d, l), true
	default:
		return lv, true
	}
}

func projectList(desired, live []any) []any {
	byName := len(desired) > 0
	for _, e := range desired {
		m, ok := e.(map[string]any)
		if !ok {
			byName = false
			break
		}
		if _, ok := m["name"].(string); !ok {
			byName = false
			break
		}
	}
	out := make([]any, 0, len(live))
	if byName {
		want := map[string]map[string]any{}
		for _, e := range desired {
			m := e.(map[string]any)
			want[m["name"].(string)] = m
		}
		// Keep the live order and live extras (someone added an env var): both are drift.
		for _, e := range live {
			lm, ok := e.(map[string]any)
			if !ok {
				out = append(out, e)
				continue
			}
			name, _ := lm["name"].(string)
			if dm, ok := want[name]; ok {
				out = append(out, projectMap(dm, lm))
			} else {
				out = append(out, lm)
			}
		}
		return out
	}
	for i, e := range live {
		if i < len(desired) {
			p, _ := projectValue(desired[i], e)
			out = append(out, p)
		} else {
			out = append(out, e)
		}
	}
	return out
}

// markSecretDrift replaces a live Secret value that differs from the desired one with a
// marker, so the plan shows that it changed without showing either value.
func markSecretDrift(desired, live, out map[string]any) {
	dd, _ := desired["data"].(map[string]any)
	ld, _ := live["data"].(map[string]any)
	od, _ := out["data"].(map[string]any)
	for k, dv := range dd {
		if lv, ok := ld[k]; ok && !reflect.DeepEqual(lv, dv) && od != nil {
			od[k] = stack.DriftedValue
		}
	}
}

// DriftedFields lists the fields (dotted paths, list elements by name or index) where the live
// object differs from the desired one on the fields desired sets; empty when there is no
// drift. Values are compared as JSON, so a number decoded from YAML (float64) equals the
// server's int64.
func DriftedFields(desired, live *unstructured.Unstructured) []string {
	var out []string
	projected := Project(desired, live)
	diffPaths("", normJSON(desired.Object), normJSON(projected.Object), &out)
	if _, unfinished, _ := unstructured.NestedString(projected.Object, "status", UnfinishedRolloutField); unfinished {
		out = append(out, "status."+UnfinishedRolloutField)
	}
	return out
}

// normJSON round-trips a value through JSON, so that equal values compare equal.
func normJSON(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		return v
	}
	return out
}

// maxDriftPaths bounds the paths reported for one object: a replaced list is one change.
const maxDriftPaths = 5

func diffPaths(at string, want, got any, out *[]string) {
	if len(*out) >= maxDriftPaths || reflect.DeepEqual(want, got) {
		return
	}
	join := func(k string) string {
		if at == "" {
			return k
		}
		return at + "." + k
	}
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			break
		}
		keys := make([]string, 0, len(w))
		for k := range w {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if gv, ok := g[k]; ok {
				diffPaths(join(k), w[k], gv, out)
			} else {
				*out = append(*out, join(k)+" (removed)")
			}
		}
		return
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			break
		}
		for i := range w {
			name := strconv.Itoa(i)
			if m, ok := w[i].(map[string]any); ok {
				if n, ok := m["name"].(string); ok {
					name = n
				}
			}
			diffPaths(at+"["+name+"]", w[i], g[i], out)
		}
		return
	}
	if at == "" {
		at = "(object)"
	}
	*out = append(*out, at)
}

// Drift compares every object of set with the cluster: one line per object that is gone or
// whose fields differ from set ("<key>: <field>, ..."), in set order; nil when none does.
func (c *Client) Drift(ctx context.Context, set stack.Set) ([]string, error) {
	var out []string
	for _, o := range set {
		live, err := c.Get(ctx, o.Object)
		if err != nil && !errors.Is(err, errNotServed) {
			return nil, err
		}
		if live == nil {
			out = append(out, o.Key+": deleted")
			continue
		}
		if f := DriftedFields(o.Object, live); len(f) > 0 {
			out = append(out, o.Key+": "+strings.Join(f, ", "))
		}
	}
	return out, nil
}
