package testenv

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"os"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
)

// nodeNames are the simulated nodes; each has kwok's default 32 CPU / 256Gi.
var nodeNames = []string{"kwok-node-0", "kwok-node-1"}

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

type client struct {
	cs  kubernetes.Interface
	dyn dynamic.Interface
}

func newClient(kubeconfig string) (*client, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 100, 200
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &client{cs: cs, dyn: dyn}, nil
}

func (c *client) createNodes(ctx context.Context) error {
	for _, name := range nodeNames {
		n := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name:        name,
				Annotations: map[string]string{"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
				Labels:      map[string]string{"type": "kwok", "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"},
			},
			Status: corev1.NodeStatus{
				Capacity:    nodeResources(),
				Allocatable: nodeResources(),
			},
		}
		if _, err := c.cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create node %s: %w", name, err)
		}
	}
	return nil
}

func nodeResources() corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse("32"),
		corev1.ResourceMemory:           resource.MustParse("256Gi"),
		corev1.ResourcePods:             resource.MustParse("110"),
		corev1.ResourceEphemeralStorage: resource.MustParse("1Ti"),
	}
}

// The default StorageClass and its provisioner (kcp provisioner, a folder per claim under the
// environment's volumes/ that any user can write, deleted with its claim).
const (
	storageClass    = "standard"
	provisionerName = "ctr-testenv/hostpath"
)

// createStorageClass makes storageClass the default StorageClass.
func (c *client) createStorageClass(ctx context.Context) error {
	immediate := storagev1.VolumeBindingImmediate
	del := corev1.PersistentVolumeReclaimDelete
	sc := &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: storageClass, Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}},
		Provisioner:       provisionerName,
		ReclaimPolicy:     &del,
		VolumeBindingMode: &immediate,
	}
	if _, err := c.cs.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create StorageClass %s: %w", storageClass, err)
	}
	return nil
}

// applyFiles server-side-applies every object of the given YAML files (CRDs here).
func (c *client) applyFiles(ctx context.Context, files []string) error {
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			var u unstructured.Unstructured
			if err := dec.Decode(&u.Object); err != nil {
				if err == io.EOF {
					break
				}
				return fmt.Errorf("decode %q: %w", f, err)
			}
			if u.GetKind() != "CustomResourceDefinition" {
				continue
			}
			body, err := u.MarshalJSON()
			if err != nil {
				return err
			}
			_, err = c.dyn.Resource(crdGVR).Patch(ctx, u.GetName(), types.ApplyPatchType, body,
				metav1.PatchOptions{FieldManager: "ctr-testenv", Force: ptr.To(true)})
			if err != nil {
				return fmt.Errorf("apply CRD %s: %w", u.GetName(), err)
			}
		}
	}
	return nil
}

// waitCRDs waits until every CRD is Established.
func (c *client) waitCRDs(ctx context.Context, timeout time.Duration) error {
	return poll(ctx, timeout, func() (bool, error) {
		list, err := c.dyn.Resource(crdGVR).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for _, crd := range list.Items {
			conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
			established := false
			for _, cond := range conds {
				m, _ := cond.(map[string]any)
				if m["type"] == "Established" && m["status"] == "True" {
					established = true
				}
			}
			if !established {
				return false, nil
			}
		}
		return len(list.Items) > 0, nil
	}, "CRDs established")
}

// applyWebhooks registers Volcano's job admission webhooks at a URL on loopback. The webhook
// manager only patches the caBundle of existing configurations; it does not create them.
func (c *client) applyWebhooks(ctx context.Context, base, caFile string) error {
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return err
	}
	none := admissionregistrationv1.SideEffectClassNone
	fail := admissionregistrationv1.Fail
	rule := func(ops ...admissionregistrationv1.OperationType) []admissionregistrationv1.RuleWithOperations {
		return []admissionregistrationv1.RuleWithOperations{{
			Operations: ops,
			Rule: admissionregistrationv1.Rule{APIGroups: []string{"batch.volcano.sh"}, APIVersions: []string{"v1alpha1"},
				Resources: []string{"jobs"}},
		}}
	}
	mut := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "volcano-admission-service-jobs-mutate"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:                    "mutatejob.volcano.sh",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: ptr.To(base + "/jobs/mutate"), CABundle: ca},
			Rules:                   rule(admissionregistrationv1.Create),
			FailurePolicy:           &fail,
			SideEffects:             &none,
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](10),
		}},
	}
	val := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "volcano-admission-service-jobs-validate"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "validatejob.volcano.sh",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: ptr.To(base + "/jobs/validate"), CABundle: ca},
			Rules:                   rule(admissionregistrationv1.Create, admissionregistrationv1.Update),
			FailurePolicy:           &fail,
			SideEffects:             &none,
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](10),
		}},
	}
	adm := c.cs.AdmissionregistrationV1()
	if _, err := adm.MutatingWebhookConfigurations().Create(ctx, mut, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create MutatingWebhookConfiguration %s: %w", mut.Name, err)
	}
	if _, err := adm.ValidatingWebhookConfigurations().Create(ctx, val, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create ValidatingWebhookConfiguration %s: %w", val.Name, err)
	}
	return nil
}

// waitReady waits for Ready untainted nodes and Volcano's default queue in state Open.
func (c *client) waitReady(ctx context.Context, timeout time.Duration) error {
	queues := schema.GroupVersionResource{Group: "scheduling.volcano.sh", Version: "v1beta1", Resource: "queues"}
	return poll(ctx, timeout, func() (bool, error) {
		nodes, err := c.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil || len(nodes.Items) < len(nodeNames) {
			return false, nil
		}
		for _, n := range nodes.Items {
			if n.Name == NodeName {
				continue // the real node, if any, starts later
			}
			if len(n.Spec.Taints) > 0 {
				return false, nil
			}
			ready := false
			for _, cond := range n.Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
					ready = true
				}
			}
			if !ready {
				return false, nil
			}
		}
		q, err := c.dyn.Resource(queues).Get(ctx, "default", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		state, _, _ := unstructured.NestedString(q.Object, "status", "state")
		return state == "Open", nil
	}, "nodes Ready and Volcano queue default Open")
}

func poll(ctx context.Context, timeout time.Duration, cond func() (bool, error), what string) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s waiting for %s", timeout, what)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
