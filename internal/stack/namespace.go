package stack

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// NamespaceType is the Terraform type of the namespace resource.
const NamespaceType = "ctr_namespace"

// Namespace is a namespace that ctr creates for a stack (and deletes again on destroy).
type Namespace struct {
	Name        string
	Labels      map[string]string // the user's, besides ctr's own
	Annotations map[string]string
}

// reservedLabels are the namespace labels ctr or Kubernetes set, which the user's may not.
var reservedLabels = []string{LabelManagedBy, OwnerLabel, corev1.LabelMetadataName}

// IsReservedLabel reports whether a namespace label is ctr's or Kubernetes' own.
func IsReservedLabel(key string) bool {
	for _, r := range reservedLabels {
		if key == r {
			return true
		}
	}
	return false
}

// Validate checks what the schema cannot: the name is the schema's (NamespacePattern), so a
// bad name gets one error.
func (n Namespace) Validate() FieldErrors {
	var errs FieldErrors
	for _, k := range sortedKeys(n.Labels) {
		if IsReservedLabel(k) {
			errs = append(errs, FieldError{Path: fmt.Sprintf("labels[%q]", k), Detail: fmt.Sprintf("%q is set by ctr or Kubernetes itself (reserved: %s).", k, strings.Join(reservedLabels, ", "))})
		}
	}
	return errs
}

// RenderNamespace is the Namespace object: the user's labels and annotations, and ctr's
// owner label, which is how destroy knows that ctr created it.
func RenderNamespace(n Namespace) (Set, error) {
	if errs := n.Validate(); len(errs) > 0 {
		return nil, errs
	}
	labels := map[string]string{}
	for k, v := range n.Labels {
		labels[k] = v
	}
	labels[LabelManagedBy], labels[OwnerLabel] = ManagedBy, Owner(NamespaceType, n.Name)
	ns := &corev1.Namespace{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: labels, Annotations: n.Annotations},
	}
	return Set{toObject(ns)}, nil
}

// CreatedNamespace reports whether a live namespace is one that a ctr_namespace created.
func CreatedNamespace(u *unstructured.Unstructured) bool {
	return u.GetLabels()[OwnerLabel] == Owner(NamespaceType, u.GetName())
}
