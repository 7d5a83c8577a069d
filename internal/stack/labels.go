// Package stack turns resource settings into the exact set of Kubernetes objects that
// realise them. It is pure: no I/O, deterministic output, golden-file tested. This is where
// the product's knowledge of PaddlePaddle, Volcano and cube lives.
package stack

import (
	"maps"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Labels every rendered object carries. OwnerLabel names the Terraform resource that owns the
// object, so the resource can find, prune and delete everything it owns with one selector.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelPartOf    = "app.kubernetes.io/part-of"
	LabelComponent = "app.kubernetes.io/component"
	LabelInstance  = "app.kubernetes.io/instance"
	LabelName      = "app.kubernetes.io/name"
	OwnerLabel     = "ctr.elasticctr.io/owner"

	// SettingsAnnotation holds the resource's settings (JSON, secrets excluded) on its primary
	// object, so that `terraform import` can rebuild the configuration from the cluster.
	SettingsAnnotation = "ctr.elasticctr.io/settings"

	// RetainAnnotation ("true") marks an object that destroying its resource leaves in
	// place (a model volume that later versions of a job and the serving may still need). It
	// keeps its owner label: a new resource of the same name takes it back.
	RetainAnnotation = "ctr.elasticctr.io/retain"

	ManagedBy = "terraform-provider-ctr"
)

// Owner is the owner label value of a Terraform resource: "<type>.<name>", e.g.
// "ctr_training_job.ctr-demo". Objects are namespaced, so (namespace, owner) is unique.
func Owner(resourceType, name string) string { return resourceType + "." + name }

// meta builds ObjectMeta with the standard labels.
func meta(name, namespace string, labels map[string]string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels}
}

// serviceMeta is a Service's metadata: meta with the annotations the user gives it (cloud
// load balancers are configured by them).
func serviceMeta(m metav1.ObjectMeta, annotations map[string]string) metav1.ObjectMeta {
	if len(annotations) > 0 {
		m.Annotations = maps.Clone(annotations)
	}
	return m
}

// commonLabels are the labels of every object of one resource instance and component.
func commonLabels(stackName, instance, owner, component string) map[string]string {
	l := stackComponent(stackName, component)
	l[LabelManagedBy], l[LabelInstance], l[OwnerLabel] = ManagedBy, instance, owner
	return l
}

// stackComponent selects the pods of one component of a stack, whichever resource renders
// them: how one resource's NetworkPolicy admits the pods of another (every pod carries
// these labels through commonLabels).
func stackComponent(stackName, component string) map[string]string {
	return map[string]string{LabelPartOf: stackName, LabelComponent: component}
}
