package kube

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestLoadBalancerHost(t *testing.T) {
	svc := func(ingress ...any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"kind": "Service"}}
		if ingress != nil {
			_ = unstructured.SetNestedSlice(u.Object, ingress, "status", "loadBalancer", "ingress")
		}
		return u
	}
	for name, c := range map[string]struct {
		svc  *unstructured.Unstructured
		want string
	}{
		"none yet":               {svc(), ""},
		"empty ingress":          {svc(map[string]any{}), ""},
		"ip":                     {svc(map[string]any{"ip": "203.0.113.7"}), "203.0.113.7"},
		"hostname (AWS ELB)":     {svc(map[string]any{"hostname": "a1.elb.amazonaws.com"}), "a1.elb.amazonaws.com"},
		"ip before hostname":     {svc(map[string]any{"ip": "203.0.113.7", "hostname": "x.example"}), "203.0.113.7"},
		"first of two ingresses": {svc(map[string]any{"ip": "203.0.113.7"}, map[string]any{"ip": "203.0.113.8"}), "203.0.113.7"},
	} {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, c.want, LoadBalancerHost(c.svc))
			done, state, err := LoadBalancerReady(c.svc)
			assert.NoError(t, err)
			assert.Equal(t, c.want != "", done, state)
		})
	}
}
