package kube

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
)

// ParseManifest decodes a multi-document manifest into an object set in install order, every
// object labelled with the owner so that it can be found again. Keys include the namespace.
func ParseManifest(data []byte, labels map[string]string) (stack.Set, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var set stack.Set
	for i := 0; ; i++ {
		var obj map[string]any
		if err := dec.Decode(&obj); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, fmt.Errorf("manifest document %d: %w", i+1, err)
		}
		if len(obj) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: obj}
		if u.GetKind() == "" || u.GetAPIVersion() == "" || u.GetName() == "" {
			return nil, fmt.Errorf("manifest document %d has no apiVersion, kind or name", i+1)
		}
		l := u.GetLabels()
		if l == nil {
			l = map[string]string{}
		}
		for k, v := range labels {
			l[k] = v
		}
		u.SetLabels(l)
		set = append(set, stack.Object{Key: ManifestKey(u), Object: u})
	}
	if len(set) == 0 {
		return nil, errors.New("the manifest has no objects")
	}
	sort.SliceStable(set, func(i, j int) bool {
		return order(set[i].Object.GetKind()) < order(set[j].Object.GetKind())
	})
	return set, nil
}

// ManifestKey is "apiVersion/Kind/namespace/name" ("apiVersion/Kind/name" when cluster-scoped).
func ManifestKey(u *unstructured.Unstructured) string {
	if u.GetNamespace() == "" {
		return stack.Key(u)
	}
	return u.GetAPIVersion() + "/" + u.GetKind() + "/" + u.GetNamespace() + "/" + u.GetName()
}

// RefFromManifestKey turns a ManifestKey back into a reference for reading or deleting the
// object; nil when the key is not one.
func RefFromManifestKey(key string) *unstructured.Unstructured {
	parts := strings.Split(key, "/")
	var apiVersion string
	if len(parts) > 0 && coreVersionRE.MatchString(parts[0]) {
		apiVersion, parts = parts[0], parts[1:]
	} else if len(parts) > 1 {
		apiVersion, parts = parts[0]+"/"+parts[1], parts[2:]
	}
	u := &unstructured.Unstructured{}
	switch len(parts) {
	case 2:
		u.SetName(parts[1])
	case 3:
		u.SetNamespace(parts[1])
		u.SetName(parts[2])
	default:
		return nil
	}
	u.SetAPIVersion(apiVersion)
	u.SetKind(parts[0])
	return u
}

// coreVersionRE matches the versions of the core group ("v1"), which has no group name.
var coreVersionRE = regexp.MustCompile(`^v\d+((alpha|beta)\d+)?$`)

// WaitInstalled waits until every CRD of the set is Established and every Deployment is
// available.
func (c *Client) WaitInstalled(ctx context.Context, set stack.Set) error {
	for _, o := range set {
		var cond Condition
		switch o.Object.GetKind() {
		case "CustomResourceDefinition":
			cond = CRDEstablished
		case "Deployment":
			cond = DeploymentAvailable
		default:
			continue
		}
		if _, err := c.WaitFor(ctx, o.Object, cond); err != nil {
			return err
		}
	}
	return nil
}

// CRDEstablished is met when a CustomResourceDefinition is Established.
func CRDEstablished(u *unstructured.Unstructured) (bool, string, error) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Established" && m["status"] == "True" {
			return true, "established", nil
		}
	}
	return false, "not established yet", nil
}
