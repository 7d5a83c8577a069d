package kube

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// An apply gives up spec.replicas only when it leaves the field out and our own last apply
// set it: then, and only then, the field is handed over before the apply.
func TestReleasesReplicas(t *testing.T) {
	entry := func(manager string, op metav1.ManagedFieldsOperationType, fields string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: op, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(fields)}
	}
	ours := entry(FieldManager, metav1.ManagedFieldsOperationApply, `{"f:spec":{"f:replicas":{},"f:template":{}}}`)
	without := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"template": map[string]any{}}}}
	with := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"replicas": int64(2)}}}
	for name, c := range map[string]struct {
		u       *unstructured.Unstructured
		managed []metav1.ManagedFieldsEntry
		want    bool
	}{
		"ours, left out":     {without, []metav1.ManagedFieldsEntry{ours}, true},
		"ours, still set":    {with, []metav1.ManagedFieldsEntry{ours}, false},
		"not ours":           {without, []metav1.ManagedFieldsEntry{entry("kube-controller-manager", metav1.ManagedFieldsOperationUpdate, `{"f:spec":{"f:replicas":{}}}`)}, false},
		"ours, other fields": {without, []metav1.ManagedFieldsEntry{entry(FieldManager, metav1.ManagedFieldsOperationApply, `{"f:spec":{"f:template":{}}}`)}, false},
		"nothing managed":    {without, nil, false},
	} {
		if got := releasesReplicas(c.u, c.managed); got != c.want {
			t.Errorf("%s: releasesReplicas = %v, want %v", name, got, c.want)
		}
	}
}
