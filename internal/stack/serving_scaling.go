package stack

import (
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// Autoscaling is a serving's HorizontalPodAutoscaler (autoscaling/v2): it sizes the serving
// Deployment between MinReplicas and MaxReplicas to keep the pods' average utilization (a
// percentage of their requests) at the targets. Zero values mean "default".
type Autoscaling struct {
	// MinReplicas defaults to DefaultServingReplicas, the size of a serving without autoscaling.
	MinReplicas int32 `json:"min_replicas,omitempty"`
	MaxReplicas int32 `json:"max_replicas"`
	// TargetCPUUtilization is a percentage of the pods' CPU request; DefaultTargetCPUUtilization
	// when neither target is set.
	TargetCPUUtilization int32 `json:"target_cpu_utilization,omitempty"`
	// TargetMemoryUtilization is a percentage of the pods' memory request; none by default.
	TargetMemoryUtilization int32 `json:"target_memory_utilization,omitempty"`
}

// DefaultTargetCPUUtilization is the CPU target of an autoscaling that sets no target.
const DefaultTargetCPUUtilization = 80

// ServingMaxUnavailable is how many serving pods the PodDisruptionBudget lets a voluntary
// disruption (a node drain) take at once.
const ServingMaxUnavailable = 1

// Defaulted returns a copy with every default filled in.
func (a Autoscaling) Defaulted() Autoscaling {
	if a.MinReplicas == 0 {
		a.MinReplicas = DefaultServingReplicas
	}
	if a.TargetCPUUtilization == 0 && a.TargetMemoryUtilization == 0 {
		a.TargetCPUUtilization = DefaultTargetCPUUtilization
	}
	return a
}

// fixedReplicas is the Deployment's spec.replicas: nil with autoscaling, which owns it.
func (s Serving) fixedReplicas() *int32 {
	if s.Autoscaling != nil {
		return nil
	}
	return ptr.To(s.Replicas)
}

// maxPods is the most serving pods a defaulted serving runs.
func (s Serving) maxPods() int32 {
	if s.Autoscaling != nil {
		return s.Autoscaling.MaxReplicas
	}
	return s.Replicas
}

// autoscaler is the HorizontalPodAutoscaler of the serving Deployment of the same name.
func (a Autoscaling) autoscaler(m metav1.ObjectMeta) *autoscalingv2.HorizontalPodAutoscaler {
	var metrics []autoscalingv2.MetricSpec
	for _, t := range []struct {
		name   corev1.ResourceName
		target int32
	}{{corev1.ResourceCPU, a.TargetCPUUtilization}, {corev1.ResourceMemory, a.TargetMemoryUtilization}} {
		if t.target == 0 {
			continue
		}
		metrics = append(metrics, autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
			Name: t.name, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To(t.target)}}})
	}
	return &autoscalingv2.HorizontalPodAutoscaler{
		TypeMeta:   kindAutoscaler,
		ObjectMeta: m,
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: kindDeployment.APIVersion, Kind: kindDeployment.Kind, Name: m.Name},
			MinReplicas:    ptr.To(a.MinReplicas),
			MaxReplicas:    a.MaxReplicas,
			Metrics:        metrics,
		},
	}
}

// disruptionBudget lets a drain take ServingMaxUnavailable serving pods at a time. It never
// blocks a drain for good: maxUnavailable (not minAvailable) lets the only pod of one go,
// and pods that are not ready (waiting for their model) may always be evicted.
func (s Serving) disruptionBudget(labels, selector map[string]string) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		TypeMeta:   kindDisruption,
		ObjectMeta: meta(s.Name, s.Namespace, labels),
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable:             ptr.To(intstr.FromInt32(ServingMaxUnavailable)),
			Selector:                   &metav1.LabelSelector{MatchLabels: selector},
			UnhealthyPodEvictionPolicy: ptr.To(policyv1.AlwaysAllow),
		},
	}
}

// autoscaling checks a serving's autoscaling against itself and the rest of the settings.
func (c *checker) autoscaling(s Serving) {
	if s.Autoscaling == nil {
		return
	}
	if s.Replicas != 0 {
		c.bad("replicas", "is set together with autoscaling, which sizes the Deployment: remove replicas (or autoscaling)")
	}
	// The schema holds each bound at 1 or more (0 is "default" here); what is left is their order.
	// Each target is a percentage of a request the pods always have (DefaultServingResources).
	a := s.Autoscaling.Defaulted()
	if a.MaxReplicas >= 1 && a.MaxReplicas < a.MinReplicas {
		c.bad("autoscaling.max_replicas", "is %d, below min_replicas (%d): it must be at least min_replicas", a.MaxReplicas, a.MinReplicas)
	}
}
