package testenv

import (
	"context"
	"fmt"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Who may use the real node's kubelet, and what no pod may ask for.
const (
	// KubeletClientUser is the user the apiserver's kubelet client certificate names: the only
	// identity the real node's kubelet admits (x509 from the environment's CA, anonymous off,
	// each request authorized by the apiserver, where this user alone is bound to the kubelet
	// API; see allowKubeletClient).
	KubeletClientUser = "ctr-testenv:apiserver-kubelet-client"
	// kubeletClientCert names the certificate's files in the environment's pki folder.
	kubeletClientCert = "apiserver-kubelet-client"

	// HostNetworkPolicy is the ValidatingAdmissionPolicy (and its binding) that refuses every
	// pod asking for the host's network namespace; HostNetworkRefusal is what the refusal says.
	HostNetworkPolicy  = "ctr-testenv-no-host-network"
	HostNetworkRefusal = "hostNetwork pods are refused on the ctr test cluster: a pod on the real node would " +
		"share the host's network and bypass its containment rules (internal/testenv/hostnet.go)"
)

// allowKubeletClient binds KubeletClientUser to the kubelet API (the bootstrap ClusterRole
// system:kubelet-api-admin: nodes/proxy, log, stats, metrics), which the kubelet's Webhook
// authorization asks the apiserver about.
func (c *client) allowKubeletClient(ctx context.Context) error {
	b := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: KubeletClientUser},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:kubelet-api-admin"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: KubeletClientUser}},
	}
	if _, err := c.cs.RbacV1().ClusterRoleBindings().Create(ctx, b, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create ClusterRoleBinding %s: %w", b.Name, err)
	}
	return nil
}

// refuseHostNetwork creates HostNetworkPolicy and its binding, and waits until the apiserver
// enforces it: a dry-run hostNetwork pod is refused with HostNetworkRefusal. A
// ValidatingAdmissionPolicy, not PodSecurity admission: it refuses exactly this one field in
// every namespace, where the baseline level would also refuse what the project's pods may
// rightly use, and need a label on each namespace the tests create.
func (c *client) refuseHostNetwork(ctx context.Context, timeout time.Duration) error {
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: HostNetworkPolicy},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
						Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
					},
				}},
			},
			Validations: []admissionregistrationv1.Validation{{
				Expression: "!has(object.spec.hostNetwork) || !object.spec.hostNetwork",
				Message:    HostNetworkRefusal,
			}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: HostNetworkPolicy},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        HostNetworkPolicy,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	adm := c.cs.AdmissionregistrationV1()
	if _, err := adm.ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create ValidatingAdmissionPolicy %s: %w", policy.Name, err)
	}
	if _, err := adm.ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create ValidatingAdmissionPolicyBinding %s: %w", binding.Name, err)
	}
	// The policy takes effect once the apiserver's informers have it; until then (and until
	// the default ServiceAccount exists) the dry run fails for another reason, or passes.
	var last error
	err := poll(ctx, timeout, func() (bool, error) {
		last = c.createHostNetworkPod(ctx, "ctr-testenv-host-network-check", metav1.DryRunAll)
		return last != nil && strings.Contains(last.Error(), HostNetworkRefusal), nil
	}, "ValidatingAdmissionPolicy "+HostNetworkPolicy+" to refuse a hostNetwork pod")
	if err != nil {
		return fmt.Errorf("%w (last answer to a dry-run hostNetwork pod: %v)", err, last)
	}
	return nil
}

// createHostNetworkPod creates (or, with dryRun, asks to create) a hostNetwork pod in default.
func (c *client) createHostNetworkPod(ctx context.Context, name string, dryRun ...string) error {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceDefault},
		Spec: corev1.PodSpec{
			HostNetwork:                  true,
			AutomountServiceAccountToken: ptr.To(false),
			Containers:                   []corev1.Container{{Name: "c", Image: PauseImage}},
		},
	}
	_, err := c.cs.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{DryRun: dryRun})
	return err
}
