package cceemu

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzRouteBodies feeds arbitrary bytes to the handlers that decode request bodies: they must answer an
// error or a result, never panic, and never accept a create without a cluster name.
func FuzzRouteBodies(f *testing.F) {
	f.Add(`{"cluster":{"clusterName":"a","k8sVersion":"1.34.2","masterConfig":{"masterType":"managed"}},"nodeGroups":[null]}`)
	f.Add(`{"cluster":null,"masters":[null]}`)
	f.Add(`{"instanceGroupName":"w","instanceTemplates":[1,{"instanceResource":{"machineSpec":"x"}}],"replicas":1e3}`)
	f.Add(`{"replicas":-1}`)
	f.Add(`null`)
	f.Fuzz(func(t *testing.T, body string) {
		s := New(Options{})
		s.clusters["cce-fuzz0000"] = &cluster{id: "cce-fuzz0000", phase: phaseRunning, spec: map[string]any{}, groups: map[string]*group{}}
		for _, h := range []struct {
			fn   handler
			path string
		}{{s.createCluster, "/cluster"}, {s.createGroup, "/cluster/cce-fuzz0000/instancegroup"}, {s.updateReplicas, "/cluster/cce-fuzz0000/instancegroup/x/replicas"}} {
			r := httptest.NewRequest(http.MethodPost, APIPrefix+h.path, strings.NewReader(body))
			r.SetPathValue("id", "cce-fuzz0000")
			r.SetPathValue("gid", "x")
			res, e := h.fn(&call{r: r, body: []byte(body)})
			if (res == nil) == (e == nil) {
				t.Fatalf("%s: result %v and error %v", h.path, res, e)
			}
		}
		for _, c := range s.clusters {
			if c.id != "cce-fuzz0000" && strings.TrimSpace(c.name) == "" {
				t.Fatalf("created a cluster without a name from %q", body)
			}
		}
	})
}
