package provider

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/acctest"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/mattfenwick/cyclonus/pkg/matcher"
	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"

	"github.com/elasticctr/terraform-provider-ctr/cube/api"
	"github.com/elasticctr/terraform-provider-ctr/cube/donefile"
	"github.com/elasticctr/terraform-provider-ctr/cube/pipeline"
	"github.com/elasticctr/terraform-provider-ctr/cube/seqfile"
	"github.com/elasticctr/terraform-provider-ctr/internal/kube"
	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
	"github.com/elasticctr/terraform-provider-ctr/internal/testenv"
	"github.com/elasticctr/terraform-provider-ctr/internal/volcano"
)

// The provider tests' one home of cluster access: the clients of the local control plane
// (requireCluster, requireRealNode) and every check a test makes of what is in the cluster.

// requireCluster skips acceptance tests unless TF_ACC is set (the framework's own rule) and
// fails them when TF_ACC is set without a cluster: `make test` always provides one, so a
// skip there would hide a broken setup.
func requireCluster(t *testing.T) *kubeClients {
	t.Helper()
	return requireClusterTB(t)
}

// requireClusterB is requireCluster for benchmarks.
func requireClusterB(b *testing.B) *kubeClients { return requireClusterTB(b) }

func requireClusterTB(t testing.TB) *kubeClients {
	t.Helper()
	if os.Getenv("TF_ACC") == "" {
		t.Skip("acceptance test: set TF_ACC=1 and KUBECONFIG (make testacc does both)")
	}
	kc := os.Getenv("KUBECONFIG")
	if kc == "" {
		t.Fatal("TF_ACC is set but KUBECONFIG is not: start the local control plane with make testenv-up")
	}
	return clientsFor(t, kc)
}

// clientsFor are clients of the cluster of a kubeconfig.
func clientsFor(t testing.TB, kubeconfig string) *kubeClients {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatalf("load kubeconfig %s: %v", kubeconfig, err)
	}
	return &kubeClients{cfg: cfg, cs: kubernetes.NewForConfigOrDie(cfg), dyn: dynamic.NewForConfigOrDie(cfg)}
}

type kubeClients struct {
	cfg *rest.Config
	cs  kubernetes.Interface
	dyn dynamic.Interface
}

// namespace creates a fresh namespace for one test and deletes it afterwards.
func (k *kubeClients) namespace(t *testing.T) string { return k.namespaceTB(t) }

func (k *kubeClients) namespaceB(b *testing.B) string { return k.namespaceTB(b) }

func (k *kubeClients) namespaceTB(t testing.TB) string {
	t.Helper()
	name := "acc-" + acctest.RandString(8)
	_, err := k.cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = k.cs.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}

// run runs one scenario of a workload resource's lifecycle against the local control plane;
// at its end destroy must leave nothing that the resource (type, name) owned, nor pods made of it.
func (k *kubeClients) run(t *testing.T, ns, typ, name string, steps ...resource.TestStep) {
	t.Helper()
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories,
		CheckDestroy:             k.nothingLeftOf(ns, typ, name),
		Steps:                    steps,
	})
}

// kindsOf are the kinds each workload resource owns, by its type (stack.CubeType, ...): what
// the provider prunes and deletes.
var kindsOf = map[string][]schema.GroupVersionKind{
	cubeWorkload.typ:        cubeWorkload.kinds,
	servingWorkload.typ:     servingWorkload.kinds,
	trainingJobWorkload.typ: trainingJobWorkload.kinds,
}

// nothingLeftOf checks that nothing a workload resource (type, name) owned is left, nor pods
// made of it.
func (k *kubeClients) nothingLeftOf(ns, typ, name string) resource.TestCheckFunc {
	kinds, ok := kindsOf[typ]
	if !ok {
		panic("no workload resource of type " + typ)
	}
	return k.checkNothingOwnedOf(ns, stack.Owner(typ, name), kinds)
}

// runFailsEarly is one apply of config that must fail with an error matching want long
// before the resource's create timeout: apply and destroy (of what the failed apply left,
// tainted) take at most 2 minutes, so the wait ended at the failure, not at the timeout.
func (k *kubeClients) runFailsEarly(t *testing.T, ns, typ, name, config, want string) {
	t.Helper()
	start := time.Now()
	k.run(t, ns, typ, name, resource.TestStep{Config: config, ExpectError: detailRE(want)})
	if took := time.Since(start); took > 2*time.Minute {
		t.Errorf("the apply and destroy took %s: the failure did not end the wait early", took)
	}
}

// defaultStorageClass is the name of the cluster's default StorageClass.
func (k *kubeClients) defaultStorageClass(t *testing.T) string {
	t.Helper()
	list, err := k.cs.StorageV1().StorageClasses().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range list.Items {
		if sc.Annotations["storageclass.kubernetes.io/is-default-class"] == "true" {
			return sc.Name
		}
	}
	t.Fatal("the cluster has no default StorageClass")
	return ""
}

// owned counts every object of a training job's kinds, and what controllers make (pods, pod
// groups), that carries the owner label.
func (k *kubeClients) owned(ctx context.Context, namespace, owner string) (int, []string, error) {
	return k.ownedOf(ctx, namespace, owner, stack.TrainingJobKinds)
}

// ownedOf counts every object of kinds, and what controllers make (pods, pod groups), that
// carries the owner label.
func (k *kubeClients) ownedOf(ctx context.Context, namespace, owner string, kinds []schema.GroupVersionKind) (int, []string, error) {
	n := 0
	var names []string
	for _, gvk := range slices.Concat(kinds, stack.ControllerKinds) {
		list, err := k.listOwned(ctx, gvk, namespace, owner)
		if err != nil {
			return 0, nil, err
		}
		for _, it := range list.Items {
			if it.GetAnnotations()[stack.RetainAnnotation] == "true" {
				continue // left on purpose (model_output.retain; TestAccTrainingJob_ModelOutputOutlivesTheJob)
			}
			names = append(names, gvk.Kind+"/"+it.GetName())
			n++
		}
	}
	return n, names, nil
}

// listOwned lists the objects of kind gvk in ns that carry owner's label; a kind the
// cluster does not serve (a PodMonitor without the Prometheus Operator) has none.
func (k *kubeClients) listOwned(ctx context.Context, gvk schema.GroupVersionKind, ns, owner string) (*unstructured.UnstructuredList, error) {
	list, err := k.dyn.Resource(gvrOf(gvk)).Namespace(ns).List(ctx, metav1.ListOptions{LabelSelector: stack.OwnerLabel + "=" + owner})
	if apierrors.IsNotFound(err) {
		return &unstructured.UnstructuredList{}, nil
	}
	return list, err
}

// deleteNamespaceB deletes an iteration's namespace and waits until it is gone, so that
// the namespace controller's work is over before settle measures the machine idle.
func (k *kubeClients) deleteNamespaceB(b *testing.B, ns string) {
	b.Helper()
	ctx := context.Background()
	if err := k.cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		b.Fatalf("delete namespace %s: %v", ns, err)
	}
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := k.cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
	must(b, err)
}

// serviceAccountTokens makes a cluster-admin ServiceAccount and n tokens for it, each bound
// to a Secret of its own: deleting the Secret revokes that token.
func (k *kubeClients) serviceAccountTokens(t *testing.T, ns string, n int) (tokens []string, revoke []func()) {
	t.Helper()
	ctx := context.Background()
	sa := "ctr-connection"
	if _, err := k.cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "ctr-connection-" + ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: ns}},
	}
	if _, err := k.cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = k.cs.RbacV1().ClusterRoleBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
	})
	for i := range n {
		s, err := k.cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("token-anchor-%d", i)}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		expiry := int64(3600)
		tr, err := k.cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
			ExpirationSeconds: &expiry,
			BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Secret", APIVersion: "v1", Name: s.Name, UID: s.UID},
		}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		tokens = append(tokens, tr.Status.Token)
		name := s.Name
		revoke = append(revoke, func() {
			if err := k.cs.CoreV1().Secrets(ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		})
	}
	return tokens, revoke
}

// providerAs is a provider block that connects as the identity of kubeconfig, to put in
// front of a test configuration.
func providerAs(kubeconfig string) string {
	return fmt.Sprintf("provider \"ctr\" {\n  kubernetes = { config_path = %q }\n}\n", kubeconfig)
}

// workloadsKubeconfig is a kubeconfig for a ServiceAccount of ns that holds only the RBAC
// guide's ClusterRole (stack.WorkloadsClusterRole), granted in ns by a RoleBinding: what a
// team's Terraform identity holds there. The resources of without are left out of it.
func (k *kubeClients) workloadsKubeconfig(t *testing.T, ns string, without ...string) string {
	t.Helper()
	ctx := context.Background()
	role := stack.WorkloadsClusterRole()
	role.Name += "-" + ns // a ClusterRole of each test's own, deleted with it
	for i := range role.Rules {
		role.Rules[i].Resources = slices.DeleteFunc(role.Rules[i].Resources, func(r string) bool { return slices.Contains(without, r) })
	}
	if _, err := k.cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = k.cs.RbacV1().ClusterRoles().Delete(context.Background(), role.Name, metav1.DeleteOptions{})
	})
	sa := "terraform"
	if _, err := k.cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "terraform"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: ns}},
	}
	if _, err := k.cs.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	expiry := int64(3600)
	tr, err := k.cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := clientcmdapi.NewConfig()
	cluster := clientcmdapi.NewCluster()
	cluster.Server, cluster.CertificateAuthorityData, cluster.CertificateAuthority = k.cfg.Host, k.cfg.CAData, k.cfg.CAFile
	cfg.Clusters["local"] = cluster
	user := clientcmdapi.NewAuthInfo()
	user.Token = tr.Status.Token
	cfg.AuthInfos["terraform"] = user
	kctx := clientcmdapi.NewContext()
	kctx.Cluster, kctx.AuthInfo, kctx.Namespace = "local", "terraform", ns
	cfg.Contexts["terraform"] = kctx
	cfg.CurrentContext = "terraform"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// checkTrainerEnv checks the live trainers' variables: values by name, and the Secret each
// of secretRefs is read from.
func (k *kubeClients) checkTrainerEnv(ns, owner string, values, secretRefs map[string]string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		tpls, err := k.podTemplates(context.Background(), ns, owner)
		if err != nil {
			return err
		}
		for key, tpl := range tpls {
			if !regexp.MustCompile(`/trainer$`).MatchString(key) {
				continue
			}
			env := map[string]corev1.EnvVar{}
			for _, e := range tpl.Spec.Containers[0].Env {
				env[e.Name] = e
			}
			for n, v := range values {
				if env[n].Value != v {
					return fmt.Errorf("%s: %s=%q, want %q", key, n, env[n].Value, v)
				}
			}
			for n, secret := range secretRefs {
				ref := env[n].ValueFrom
				if env[n].Value != "" || ref == nil || ref.SecretKeyRef == nil || ref.SecretKeyRef.Name != secret || ref.SecretKeyRef.Key != n {
					return fmt.Errorf("%s: %s is %+v, want a reference to key %s of Secret %s", key, n, env[n], n, secret)
				}
			}
			return nil
		}
		return fmt.Errorf("no trainer among %d pod templates", len(tpls))
	}
}

// podTemplates lists the pod templates of every Deployment, StatefulSet and Volcano Job task
// an owner has in the cluster, by "Kind/name[/task]".
func (k *kubeClients) podTemplates(ctx context.Context, ns, owner string) (map[string]corev1.PodTemplateSpec, error) {
	out := map[string]corev1.PodTemplateSpec{}
	sel := metav1.ListOptions{LabelSelector: stack.OwnerLabel + "=" + owner}
	deps, err := k.cs.AppsV1().Deployments(ns).List(ctx, sel)
	if err != nil {
		return nil, err
	}
	for _, d := range deps.Items {
		out["Deployment/"+d.Name] = d.Spec.Template
	}
	stss, err := k.cs.AppsV1().StatefulSets(ns).List(ctx, sel)
	if err != nil {
		return nil, err
	}
	for _, s := range stss.Items {
		out["StatefulSet/"+s.Name] = s.Spec.Template
	}
	jobs, err := k.dyn.Resource(gvrOf(schema.GroupVersionKind{Group: "batch.volcano.sh", Version: "v1alpha1", Kind: "Job"})).Namespace(ns).List(ctx, sel)
	if err != nil {
		return nil, err
	}
	for _, u := range jobs.Items {
		var job batchv1alpha1.Job
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &job); err != nil {
			return nil, err
		}
		for _, t := range job.Spec.Tasks {
			out["Job/"+job.Name+"/"+t.Name] = t.Template
		}
	}
	return out, nil
}

// checkPods checks every pod template of an owner; want picks the expectation per template.
func (k *kubeClients) checkPods(ns, owner string, count int, want func(key string) hardening) resource.TestCheckFunc {
	return k.checkPodTemplates(ns, owner, count, func(key string, tpl corev1.PodTemplateSpec) error {
		return checkHardening(key, tpl, want(key))
	})
}

// checkPodTemplates checks that an owner has count live pod templates, and each with check.
func (k *kubeClients) checkPodTemplates(ns, owner string, count int, check func(key string, tpl corev1.PodTemplateSpec) error) resource.TestCheckFunc {
	return func(*terraform.State) error {
		tpls, err := k.podTemplates(context.Background(), ns, owner)
		if err != nil {
			return err
		}
		if len(tpls) != count {
			return fmt.Errorf("%d pod templates owned by %s, want %d: %v", len(tpls), owner, count, keysOf(tpls))
		}
		for key, tpl := range tpls {
			if err := check(key, tpl); err != nil {
				return err
			}
		}
		return nil
	}
}

// runningPods returns the pods that match a selector, as the API server holds them.
func (k *kubeClients) runningPods(ctx context.Context, ns string, sel map[string]string) ([]corev1.Pod, error) {
	pods, err := k.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(sel).String()})
	if err != nil {
		return nil, err
	}
	if len(pods.Items) == 0 {
		return nil, fmt.Errorf("no pods with %v", sel)
	}
	return pods.Items, nil
}

// checkCubePolicies evaluates the cube's live NetworkPolicies with cyclonus's matcher over
// the live pods and their namespace's live labels: the server policy guards the cube servers
// and admits the transfer and the stack's serving pods to the cube port, not another server;
// the transfer policy admits only cube servers to the files port and anyone to the status port.
func (k *kubeClients) checkCubePolicies(ns, cube, serving string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		ctx := context.Background()
		component := func(c string) map[string]string {
			return map[string]string{stack.LabelInstance: cube, stack.LabelComponent: c}
		}
		servers, err := k.runningPods(ctx, ns, component("cube-server"))
		if err != nil {
			return err
		}
		transfer, err := k.runningPods(ctx, ns, component("cube-transfer"))
		if err != nil {
			return err
		}
		servingPods, err := k.runningPods(ctx, ns, map[string]string{stack.LabelInstance: serving, stack.LabelComponent: "serving"})
		if err != nil {
			return err
		}
		namespace, err := k.cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err != nil {
			return err
		}
		np := k.cs.NetworkingV1().NetworkPolicies(ns)
		srv, err := np.Get(ctx, cube+"-server", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(srv.Spec.Ingress) != 2 || !slices.Equal(policyPorts(srv.Spec.Ingress[0]), []int32{8027}) ||
			!slices.Equal(policyPorts(srv.Spec.Ingress[1]), []int32{stack.CubeProbePort}) {
			return fmt.Errorf("policy %s ingress %+v: want a rule for port 8027 and one for the metrics' scrapers on the probe port %d", srv.Name, srv.Spec.Ingress, stack.CubeProbePort)
		}
		tr, err := np.Get(ctx, cube+"-transfer", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(tr.Spec.Ingress) != 2 || !slices.Equal(policyPorts(tr.Spec.Ingress[0]), []int32{stack.DefaultTransferFilesPort}) ||
			!slices.Equal(policyPorts(tr.Spec.Ingress[1]), []int32{stack.DefaultTransferPort}) || len(tr.Spec.Ingress[1].From) != 0 {
			return fmt.Errorf("policy %s ingress %+v: want the files port from cube servers and the status port from anyone", tr.Name, tr.Spec.Ingress)
		}
		policy := matcher.BuildNetworkPolicies(false, []*networkingv1.NetworkPolicy{srv, tr})
		// expect says whether src must reach dst's named container port, by cyclonus's verdict.
		expect := func(src, dst corev1.Pod, portName string, want bool) error {
			port, ok := namedPort(dst, portName)
			if !ok {
				return fmt.Errorf("pod %s has no port %q", dst.Name, portName)
			}
			peer := func(p corev1.Pod) *matcher.TrafficPeer {
				return &matcher.TrafficPeer{IP: p.Status.PodIP, Internal: &matcher.InternalPeer{
					PodLabels: p.Labels, Namespace: p.Namespace, NamespaceLabels: namespace.Labels}}
			}
			traffic := &matcher.Traffic{Source: peer(src), Destination: peer(dst),
				ResolvedPort: int(port.ContainerPort), ResolvedPortName: port.Name, Protocol: corev1.ProtocolTCP}
			if got := policy.IsTrafficAllowed(traffic).IsAllowed(); got != want {
				return fmt.Errorf("pod %s -> pod %s port %s: allowed %v, want %v (policies %s, %s)", src.Name, dst.Name, portName, got, want, srv.Name, tr.Name)
			}
			return nil
		}
		var errs []error
		for _, dst := range servers {
			if len(policy.TargetsApplyingToPod(true, ns, dst.Labels)) == 0 {
				errs = append(errs, fmt.Errorf("no policy guards cube server %s", dst.Name))
			}
			for _, src := range append(slices.Clone(transfer), servingPods...) {
				errs = append(errs, expect(src, dst, "cube", true))
			}
			for _, src := range servers {
				if src.Name != dst.Name {
					errs = append(errs, expect(src, dst, "cube", false))
				}
			}
		}
		for _, dst := range transfer {
			for _, src := range servers {
				errs = append(errs, expect(src, dst, "files", true))
			}
			// The transfer too: the rule does not admit its labels (its own pod reaches itself anyway).
			for _, src := range append(slices.Clone(servingPods), transfer...) {
				errs = append(errs, expect(src, dst, "files", false), expect(src, dst, "http", true))
			}
		}
		return errors.Join(errs...)
	}
}

// namedPort is a pod's container port of that name.
func namedPort(p corev1.Pod, name string) (corev1.ContainerPort, bool) {
	for _, c := range p.Spec.Containers {
		for _, port := range c.Ports {
			if port.Name == name {
				return port, true
			}
		}
	}
	return corev1.ContainerPort{}, false
}

func (k *kubeClients) checkNoPolicies(ns, owner string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		list, err := k.cs.NetworkingV1().NetworkPolicies(ns).List(context.Background(), metav1.ListOptions{LabelSelector: stack.OwnerLabel + "=" + owner})
		if err != nil {
			return err
		}
		if len(list.Items) > 0 {
			return fmt.Errorf("%d NetworkPolicies left after network_policy.enabled = false", len(list.Items))
		}
		return nil
	}
}

func (k *kubeClients) checkCubeMemory(ns, sts, want string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		s, err := k.cs.AppsV1().StatefulSets(ns).Get(context.Background(), sts, metav1.GetOptions{})
		if err != nil {
			return err
		}
		r := s.Spec.Template.Spec.Containers[0].Resources
		if got := r.Limits.Memory().String(); got != want {
			return fmt.Errorf("cube container memory limit %s, want %s", got, want)
		}
		return nil
	}
}

// livePods checks every pod in the namespace: each container's image (want, by the pod's
// component label) and its pull secrets.
func (k *kubeClients) livePods(ns string, want map[string]string, secrets map[string][]string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		pods, err := k.cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: stack.LabelManagedBy + "=" + stack.ManagedBy})
		if err != nil {
			return err
		}
		seen := map[string]bool{}
		for _, p := range pods.Items {
			component := p.Labels[stack.LabelComponent]
			image, ok := want[component]
			if !ok {
				return fmt.Errorf("pod %s: component %q is not one the test knows", p.Name, component)
			}
			seen[component] = true
			for _, c := range append(p.Spec.InitContainers, p.Spec.Containers...) {
				image := image
				if own, ok := want[component+"/"+c.Name]; ok {
					image = own
				}
				if c.Image != image {
					return fmt.Errorf("pod %s (%s): container %s runs %s, want %s", p.Name, component, c.Name, c.Image, image)
				}
			}
			var got []string
			for _, s := range p.Spec.ImagePullSecrets {
				got = append(got, s.Name)
			}
			if strings.Join(got, ",") != strings.Join(secrets[component], ",") {
				return fmt.Errorf("pod %s (%s): pull secrets %v, want %v", p.Name, component, got, secrets[component])
			}
		}
		for c := range want {
			if c, _, _ = strings.Cut(c, "/"); !seen[c] {
				return fmt.Errorf("no pod of component %s", c)
			}
		}
		return nil
	}
}

// deploymentImage: the Deployment's pod template runs image.
func (k *kubeClients) deploymentImage(ns, name, image string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		d, err := k.cs.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got := d.Spec.Template.Spec.Containers[0].Image; got != image {
			return fmt.Errorf("deployment %s runs %s, want %s", name, got, image)
		}
		return nil
	}
}

// loadBalance gives the Service ns/name, once it exists as a LoadBalancer, the ingress: what
// a cloud controller does while the apply waits. It stops at the end of the test.
func (k *kubeClients) loadBalance(t *testing.T, ns, name string, ingress corev1.LoadBalancerIngress) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		_ = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			return k.setIngress(ctx, ns, name, ingress) == nil, nil
		})
	}()
}

// setIngress sets the Service's load balancer ingress, if it is a LoadBalancer.
func (k *kubeClients) setIngress(ctx context.Context, ns, name string, ingress corev1.LoadBalancerIngress) error {
	svc, err := k.cs.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		return fmt.Errorf("service %s/%s is a %s", ns, name, svc.Spec.Type)
	}
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{ingress}
	_, err = k.cs.CoreV1().Services(ns).UpdateStatus(ctx, svc, metav1.UpdateOptions{})
	return err
}

// serviceAnnotated checks that the live Service carries the annotations.
func (k *kubeClients) serviceAnnotated(ns, name string, want map[string]string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		svc, err := k.cs.CoreV1().Services(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for key, v := range want {
			if svc.Annotations[key] != v {
				return fmt.Errorf("service %s/%s: annotation %s = %q, want %q", ns, name, key, svc.Annotations[key], v)
			}
		}
		return nil
	}
}

// podPrerequisites creates what the pod block refers to: a PriorityClass, a Secret, a
// ConfigMap, a claim, and a ServiceAccount of the user's.
func (k *kubeClients) podPrerequisites(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	_, err := k.cs.SchedulingV1().PriorityClasses().Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: podPriorityClass}, Value: 1000}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	core := k.cs.CoreV1()
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(core.Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds"}, StringData: map[string]string{"secret": podSecretValue}}, metav1.CreateOptions{}))
	must(core.ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"}, Data: map[string]string{"A": "1"}}, metav1.CreateOptions{}))
	must(core.ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "mine"}}, metav1.CreateOptions{}))
	k.claim(t, ns, "dataset")
}

// claim creates a 1 GiB ReadWriteOnce claim of the default StorageClass in ns.
func (k *kubeClients) claim(t *testing.T, ns, name string) {
	t.Helper()
	_, err := k.cs.CoreV1().PersistentVolumeClaims(ns).Create(context.Background(), &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: apiresource.MustParse("1Gi")}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create claim %s/%s: %v", ns, name, err)
	}
}

// checkPodKnobs checks every knob on every live pod template of an owner; sa is the
// ServiceAccount the pods must run as.
func (k *kubeClients) checkPodKnobs(ns, owner string, count int, sa func(key string) string) resource.TestCheckFunc {
	return k.checkPodTemplates(ns, owner, count, func(key string, tpl corev1.PodTemplateSpec) error {
		if err := podKnobs(tpl, sa(key)); err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		return nil
	})
}

// checkServiceAccount checks the annotations of a ServiceAccount ctr created.
func (k *kubeClients) checkServiceAccount(ns, name string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		sa, err := k.cs.CoreV1().ServiceAccounts(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got := sa.Annotations["eks.amazonaws.com/role-arn"]; got != "arn:aws:iam::123456789012:role/ctr" {
			return fmt.Errorf("ServiceAccount %s annotation %q", name, got)
		}
		return nil
	}
}

// checkNoValues checks that neither the state (manifests) nor any live annotation of the
// owner's objects holds the Secret's value, and that the settings annotation holds no env value.
func (k *kubeClients) checkNoValues(ns, owner string, kinds []schema.GroupVersionKind) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		for addr, r := range s.RootModule().Resources {
			for attr, v := range r.Primary.Attributes {
				if strings.Contains(v, podSecretValue) {
					return fmt.Errorf("%s.%s holds the Secret's value", addr, attr)
				}
			}
		}
		for _, gvk := range kinds {
			list, err := k.listOwned(context.Background(), gvk, ns, owner)
			if err != nil {
				return err
			}
			for _, u := range list.Items {
				for key, v := range u.GetAnnotations() {
					if strings.Contains(v, podSecretValue) || (key == stack.SettingsAnnotation && strings.Contains(v, podPlainValue)) {
						return fmt.Errorf("annotation %s of %s/%s holds a value", key, gvk.Kind, u.GetName())
					}
				}
			}
		}
		return nil
	}
}

// fileServerGet fetches a path from the training job's file server (the host of the state's
// donefile_url) through the API server's service proxy.
func (k *kubeClients) fileServerGet(s *terraform.State, ns, path string) ([]byte, error) {
	u, err := url.Parse(s.RootModule().Resources["ctr_training_job.train"].Primary.Attributes["donefile_url"])
	if err != nil {
		return nil, err
	}
	svc, port, _ := strings.Cut(u.Host, ":")
	svc, _, _ = strings.Cut(svc, ".")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := k.cs.CoreV1().Services(ns).ProxyGet("http", svc, port, path, nil).DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("GET %s through service %s/%s: %w", path, ns, svc, err)
	}
	return b, nil
}

// waitDonefile waits until the donefile the training job exports has n lines, and returns
// their ids.
func (k *kubeClients) waitDonefile(ns string, n int, timeout time.Duration, ids *[]string) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		u, err := url.Parse(s.RootModule().Resources["ctr_training_job.train"].Primary.Attributes["donefile_url"])
		if err != nil {
			return err
		}
		var last string
		err = wait.PollUntilContextTimeout(context.Background(), time.Second, timeout, true, func(context.Context) (bool, error) {
			body, err := k.fileServerGet(s, ns, u.Path)
			if err != nil {
				last = err.Error()
				return false, nil
			}
			last = string(body)
			es, _ := donefile.Parse(body)
			if len(es) < n {
				return false, nil
			}
			*ids = (*ids)[:0]
			for _, e := range es {
				*ids = append(*ids, e.ID)
			}
			return true, nil
		})
		if err != nil {
			return fmt.Errorf("the model export did not publish %d versions within %s: %w; donefile: %s; export log: %s", n, timeout, err, last,
				k.deploymentLogs(ns, "e2e-model-export"))
		}
		return nil
	}
}

// deploymentLogs is the log of the first pod whose name starts with a Deployment's (for
// failure messages).
func (k *kubeClients) deploymentLogs(ns, name string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	pods, err := k.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "(no pods: " + err.Error() + ")"
	}
	for _, p := range pods.Items {
		if strings.HasPrefix(p.Name, name+"-") {
			data, err := k.cs.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
			if err != nil {
				return "(no log of " + p.Name + ": " + err.Error() + ")"
			}
			return string(data)
		}
	}
	return "(no pod " + name + "-*)"
}

// servesModel fetches, through the API server's service proxy, the donefile at the state's
// donefile_url, then its line id's input directory listing and every file listed, and checks
// the files hold e2eModelKeys records of generation gen.
func (k *kubeClients) servesModel(ns, id string, gen byte) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		donefileURL, err := url.Parse(s.RootModule().Resources["ctr_training_job.train"].Primary.Attributes["donefile_url"])
		if err != nil {
			return err
		}
		get := func(u *url.URL) ([]byte, error) { return k.fileServerGet(s, ns, u.Path) }
		b, err := get(donefileURL)
		if err != nil {
			return err
		}
		entries, warns := donefile.Parse(b)
		if len(entries) != 1 || entries[0].ID != id || len(warns) > 0 {
			return fmt.Errorf("donefile %s: %q, want one line of id %s (warnings: %v)", donefileURL, b, id, warns)
		}
		input := donefileURL.ResolveReference(&url.URL{Path: strings.TrimSuffix(entries[0].Input, "/") + "/"})
		listing, err := get(input)
		if err != nil {
			return err
		}
		dir := filepath.Join(os.TempDir(), "ctr-e2e-model-"+ns)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		var files []string
		for _, m := range regexp.MustCompile(`href="([^"?/]+)"`).FindAllStringSubmatch(string(listing), -1) {
			if strings.HasPrefix(m[1], ".") || strings.HasPrefix(m[1], "_") {
				continue
			}
			b, err := get(input.ResolveReference(&url.URL{Path: m[1]}))
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(dir, m[1]), b, 0o644); err != nil {
				return err
			}
			files = append(files, m[1])
		}
		records, wrong := 0, 0
		err = seqfile.ReadAll(dir, seqfile.Options{}, func(key uint64, value []byte) error {
			records++
			if !bytes.Equal(value, pipeline.Value(key, gen, pipeline.DefaultValueSize)) {
				wrong++
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("model %s (files %v): %w", input, files, err)
		}
		if records != e2eModelKeys || wrong > 0 {
			return fmt.Errorf("model %s (files %v): %d records, %d with a wrong value; want %d of generation %d", input, files, records, wrong, e2eModelKeys, gen)
		}
		return nil
	}
}

// logPodTimes logs, for the pods the selector selects, how long each took from creation to
// its containers' start and to Ready (a cube server is Ready once it serves a model).
func (k *kubeClients) logPodTimes(t *testing.T, ns, selector string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		pods, err := k.cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return err
		}
		for _, p := range pods.Items {
			var started, ready time.Duration
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.ContainersReady && c.Status == corev1.ConditionTrue {
					ready = c.LastTransitionTime.Sub(p.CreationTimestamp.Time)
				}
			}
			for _, cs := range p.Status.ContainerStatuses {
				if cs.State.Running != nil {
					started = cs.State.Running.StartedAt.Sub(p.CreationTimestamp.Time)
				}
			}
			t.Logf("pod %s: created -> container running %s, -> Ready %s", p.Name, started, ready)
		}
		return nil
	}
}

func (k *kubeClients) statefulSetGone(ns, name string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		_, err := k.cs.AppsV1().StatefulSets(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err == nil {
			return fmt.Errorf("StatefulSet %s/%s still exists after the apply", ns, name)
		}
		return nil
	}
}

// servesNow checks, without waiting, that the cube serves a build of donefile id for shards
// shards other than not (the apply waited for it).
func (k *kubeClients) servesNow(ns, cube, id string, shards int, version *string, not string) resource.TestCheckFunc {
	return k.waitServedShards(ns, cube, id, shards, time.Second, version, not)
}

func (k *kubeClients) countClaims(ns string, want int) resource.TestCheckFunc {
	return func(*terraform.State) error {
		list, err := k.cs.CoreV1().PersistentVolumeClaims(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(list.Items) != want {
			var names []string
			for _, c := range list.Items {
				names = append(names, c.Name)
			}
			return fmt.Errorf("%d claims in %s (%s), want %d", len(list.Items), ns, strings.Join(names, ", "), want)
		}
		return nil
	}
}

func (k *kubeClients) checkNoClaims(ns string) resource.TestCheckFunc { return k.countClaims(ns, 0) }

// deletePodAndWaitServing deletes one cube pod and waits until its shard's replicas all serve
// version again (the StatefulSet brings the pod back empty; the transfer's heal pass fills it).
func (k *kubeClients) deletePodAndWaitServing(t *testing.T, ns, cube, pod string, version *string, timeout time.Duration) resource.TestCheckFunc {
	return func(*terraform.State) error {
		ctx := context.Background()
		old, err := k.cs.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
		if err != nil {
			return err
		}
		start := time.Now()
		if err := k.cs.CoreV1().Pods(ns).Delete(ctx, pod, metav1.DeleteOptions{}); err != nil {
			return err
		}
		var last string
		err = wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
			p, err := k.cs.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
			if err != nil || p.UID == old.UID {
				return false, nil // not yet re-created
			}
			st, body, err := k.transferStatus(ctx, ns, cube)
			if err != nil {
				return false, nil
			}
			last = body
			if st.ServedVersion != *version {
				return false, nil
			}
			for _, sh := range st.Shards {
				if sh.Serving != len(sh.Replicas) {
					return false, nil
				}
			}
			return true, nil
		})
		if err != nil {
			return fmt.Errorf("pod %s/%s deleted: its shard did not serve %s on every replica again within %s: %w; last status: %s", ns, pod, *version, timeout, err, last)
		}
		t.Logf("pod %s deleted: every replica serves %s again after %s", pod, *version, time.Since(start).Round(100*time.Millisecond))
		return nil
	}
}

// waitServed waits (bounded) until the replicas of every shard of the cube serve the version
// the transfer built from donefile id, and records that version's name in *version.
func (k *kubeClients) waitServed(ns, cube, id string, timeout time.Duration, version *string) resource.TestCheckFunc {
	return k.waitServedShards(ns, cube, id, 0, timeout, version, "")
}

// waitServedShards is waitServed for a build with shards shards (0: any) other than the
// version not (a re-shard rebuilds the same donefile id under a new version name).
func (k *kubeClients) waitServedShards(ns, cube, id string, shards int, timeout time.Duration, version *string, not string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		var last string
		err := wait.PollUntilContextTimeout(context.Background(), time.Second, timeout, true, func(ctx context.Context) (bool, error) {
			st, body, err := k.transferStatus(ctx, ns, cube)
			if err != nil {
				last = err.Error()
				return false, nil
			}
			last = body
			if shards > 0 && len(st.Shards) != shards {
				return false, nil
			}
			for _, r := range st.History {
				if r.ID == id && r.Result == "served" && st.ServedVersion == r.Version && r.Version != not {
					*version = r.Version
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("cube %s/%s did not serve donefile id %s within %s: %w; last status: %s", ns, cube, id, timeout, err, last)
		}
		return nil
	}
}

// transferStatus reads the cube's transfer status through the API server's service proxy:
// the decoded status and its raw body (for failure messages).
func (k *kubeClients) transferStatus(ctx context.Context, ns, cube string) (api.Status, string, error) {
	c := stack.Cube{Name: cube, Namespace: ns}.Defaulted()
	body, err := k.cs.CoreV1().Services(ns).ProxyGet("http", c.TransferService(), strconv.Itoa(int(c.TransferPort)), stack.TransferStatusPath, nil).DoRaw(ctx)
	if err != nil {
		return api.Status{}, "", err
	}
	st, err := stack.DecodeTransferStatus(body)
	if err != nil {
		return api.Status{}, string(body), fmt.Errorf("transfer status of cube %s/%s: %w", ns, cube, err)
	}
	return st, string(body), nil
}

// lookupJob runs `cube seek --conf` in a Job on the real node with the state's cube_conf
// mounted from a ConfigMap and checks every key's value is generation gen's.
func (k *kubeClients) lookupJob(t *testing.T, ns, image, name string, gen int) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		// A shard Service that just got its first ready pods may not be in the cluster DNS yet
		// (CoreDNS answers SERVFAIL until its endpoint watch catches up): seek waits up to
		// --ready-within for every name to resolve and every shard to answer, and the Job
		// retries twice. A wrong value fails every attempt.
		if err := k.startSeekJob(t, s, ns, image, name, 2, "--first", strconv.Itoa(e2eModelKeys), "--check", strconv.Itoa(gen), "--ready-within", "1m"); err != nil {
			return err
		}
		logs, err := k.waitJob(ns, name, 3*time.Minute)
		if err != nil {
			return fmt.Errorf("%w: not every value is generation %d", err, gen)
		}
		t.Logf("lookup job: %s", lastLine(logs))
		return nil
	}
}

// startSeekJob starts `cube seek --conf /conf/cube.conf ARGS...` in a Job, with the state's
// cube_conf mounted from a ConfigMap, exactly what Paddle Serving would read.
func (k *kubeClients) startSeekJob(t *testing.T, s *terraform.State, ns, image, name string, retries int32, args ...string) error {
	ctx := context.Background()
	conf := s.RootModule().Resources["ctr_cube.cube"].Primary.Attributes["cube_conf"]
	if conf == "" {
		return fmt.Errorf("ctr_cube.cube exports no cube_conf")
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name + "-conf", Namespace: ns}, Data: map[string]string{"cube.conf": conf}}
	if _, err := k.cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		return err
	}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: batchv1.JobSpec{
			BackoffLimit: ptr.To(retries),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{
					Name: "seek", Image: image, ImagePullPolicy: corev1.PullIfNotPresent,
					Args:         append([]string{"seek", "--conf", "/conf/cube.conf", "--timeout", "30s"}, args...),
					VolumeMounts: []corev1.VolumeMount{{Name: "conf", MountPath: "/conf"}},
				}},
				Volumes: []corev1.Volume{{Name: "conf", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: cm.Name}}}}},
			}},
		},
	}
	if _, err := k.cs.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		return err
	}
	t.Cleanup(func() {
		bg := metav1.DeletePropagationBackground
		_ = k.cs.BatchV1().Jobs(ns).Delete(context.Background(), name, metav1.DeleteOptions{PropagationPolicy: &bg})
	})
	return nil
}

// jobFinished says whether the Job has ended.
func (k *kubeClients) jobFinished(ns, name string) bool {
	j, err := k.cs.BatchV1().Jobs(ns).Get(context.Background(), name, metav1.GetOptions{})
	return err == nil && (j.Status.Succeeded > 0 || j.Status.Failed > 0)
}

// waitJob waits for the Job to end and returns its pod's log; an error if it failed.
func (k *kubeClients) waitJob(ns, name string, timeout time.Duration) (string, error) {
	ctx := context.Background()
	var done *batchv1.Job
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		j, err := k.cs.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		done = j
		return j.Status.Succeeded > 0 || j.Status.Failed > 0, nil
	})
	logs := k.jobLogs(ctx, ns, name)
	if err != nil {
		return logs, fmt.Errorf("job %s/%s did not finish: %w\n%s", ns, name, err, logs)
	}
	if done.Status.Succeeded == 0 {
		return logs, fmt.Errorf("job %s/%s failed\n%s", ns, name, logs)
	}
	return logs, nil
}

func (k *kubeClients) jobLogs(ctx context.Context, ns, job string) string {
	pods, err := k.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "job-name=" + job})
	if err != nil || len(pods.Items) == 0 {
		return "(no pod)"
	}
	pod := pods.Items[0].Name // the one that succeeded, if any (a Job may retry)
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodSucceeded {
			pod = p.Name
		}
	}
	data, err := k.cs.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	return string(data)
}

func (k *kubeClients) volcanoJobRunning(ns, name string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		u, err := k.dyn.Resource(vcjobGVR).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("Volcano job %s/%s: %w", ns, name, err)
		}
		if p := kube.VolcanoJobPhase(u); p != "Running" {
			return fmt.Errorf("Volcano job %s/%s is %q, want Running", ns, name, p)
		}
		return nil
	}
}

// intact checks that the objects of a Volcano install are there, not being deleted, and
// carry no label or annotation of ctr's.
func (k *kubeClients) intact(keys []string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		for _, key := range keys {
			ref := kube.RefFromManifestKey(key)
			gvr := map[string]schema.GroupVersionResource{"Namespace": nsGVR, "CustomResourceDefinition": crdGVR, "Deployment": depGVR}[ref.GetKind()]
			var ri dynamic.ResourceInterface = k.dyn.Resource(gvr)
			if ref.GetNamespace() != "" {
				ri = k.dyn.Resource(gvr).Namespace(ref.GetNamespace())
			}
			u, err := ri.Get(context.Background(), ref.GetName(), metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("pre-existing %s: %w", key, err)
			}
			if u.GetDeletionTimestamp() != nil {
				return fmt.Errorf("pre-existing %s is being deleted", key)
			}
			for l := range u.GetLabels() {
				if strings.HasPrefix(l, "ctr.elasticctr.io/") || u.GetLabels()[l] == "terraform-provider-ctr" {
					return fmt.Errorf("pre-existing %s carries ctr's label %s", key, l)
				}
			}
			for a := range u.GetAnnotations() {
				if strings.HasPrefix(a, "ctr.elasticctr.io/") {
					return fmt.Errorf("pre-existing %s carries ctr's annotation %s", key, a)
				}
			}
		}
		return nil
	}
}

// noOwnedVolcanoCRDs says whether a destroy left any Volcano CRD that ctr_cluster owns.
func (k *kubeClients) noOwnedVolcanoCRDs() error {
	list, err := k.dyn.Resource(crdGVR).List(context.Background(), metav1.ListOptions{LabelSelector: stack.OwnerLabel + "=" + volcano.Owner})
	if err != nil {
		return err
	}
	if len(list.Items) > 0 {
		return fmt.Errorf("destroy left %d Volcano CRDs", len(list.Items))
	}
	return nil
}

func (k *kubeClients) checkNothingOwnedOf(ns, owner string, kinds []schema.GroupVersionKind) resource.TestCheckFunc {
	return func(*terraform.State) error {
		n, names, err := k.ownedOf(context.Background(), ns, owner, kinds)
		if err != nil {
			return err
		}
		if n > 0 {
			return fmt.Errorf("destroy left %d objects owned by %s: %s", n, owner, strings.Join(names, ", "))
		}
		return nil
	}
}

func (k *kubeClients) statefulSetReplicas(ns, name string, want int32) resource.TestCheckFunc {
	return func(*terraform.State) error {
		sts, err := k.cs.AppsV1().StatefulSets(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if *sts.Spec.Replicas != want || sts.Status.ReadyReplicas != want {
			return fmt.Errorf("StatefulSet %s: %d/%d ready, want %d", name, sts.Status.ReadyReplicas, *sts.Spec.Replicas, want)
		}
		return nil
	}
}

// namespaceGone: destroy deleted the namespace ctr created and waited until it was gone.
func (k *kubeClients) namespaceGone(ns string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		_, err := k.cs.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("namespace %s still exists after destroy (err %v)", ns, err)
		}
		return nil
	}
}

// namespaceActive: the namespace exists and is not being deleted.
func (k *kubeClients) namespaceActive(ns string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		n, err := k.cs.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("namespace %s: %w", ns, err)
		}
		if n.DeletionTimestamp != nil {
			return fmt.Errorf("namespace %s is being deleted", ns)
		}
		return nil
	}
}

func (k *kubeClients) cubeConfChecksum(ns, name string) (string, error) {
	d, err := k.cs.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	return d.Spec.Template.Annotations[stack.CubeConfChecksumAnnotation], nil
}

// runsLauncher checks that the serving pods start with the launcher (cube serving), which the
// init container copies from the cube image, and point SERVING_BIN at the image's binary.
func (k *kubeClients) runsLauncher(ns, name, launcherImage string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		d, err := k.cs.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		spec := d.Spec.Template.Spec
		c := spec.Containers[0]
		if fmt.Sprint(c.Command) != fmt.Sprint(stack.DefaultServingCommand) || fmt.Sprint(c.Args) != "[--port=8010 --dir="+stack.ServingWorkDir+" --status-listen=:"+strconv.Itoa(stack.ServingStatusPort)+"]" {
			return fmt.Errorf("serving container runs %v %v, want the launcher", c.Command, c.Args)
		}
		if !slices.Contains(c.Env, corev1.EnvVar{Name: "SERVING_BIN", Value: stack.DefaultServingBin}) {
			return fmt.Errorf("serving container env %v: no SERVING_BIN=%s", c.Env, stack.DefaultServingBin)
		}
		if len(spec.InitContainers) != 1 || spec.InitContainers[0].Image != launcherImage || fmt.Sprint(spec.InitContainers[0].Args) != "[install "+stack.ServingLauncherDir+"]" {
			return fmt.Errorf("init containers %v: want one that installs the launcher from %s", spec.InitContainers, launcherImage)
		}
		return nil
	}
}

func (k *kubeClients) deploymentAvailable(ns, name string, want int32) resource.TestCheckFunc {
	return func(*terraform.State) error {
		d, err := k.cs.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if d.Status.AvailableReplicas != want {
			return fmt.Errorf("deployment %s: %d replicas available, want %d", name, d.Status.AvailableReplicas, want)
		}
		return nil
	}
}

func (k *kubeClients) checkPodsRunning(ns, job string, want int) resource.TestCheckFunc {
	return func(*terraform.State) error {
		pods, err := k.cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "volcano.sh/job-name=" + job})
		if err != nil {
			return err
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.Spec.SchedulerName == "volcano" {
				running++
			}
		}
		if running != want {
			return fmt.Errorf("%d of %d job pods Running under the volcano scheduler, want %d", running, len(pods.Items), want)
		}
		return nil
	}
}

func (k *kubeClients) deleteOwned(ns, owner string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bg := metav1.DeletePropagationForeground
	for _, gvk := range stack.TrainingJobKinds {
		ri := k.dyn.Resource(gvrOf(gvk)).Namespace(ns)
		list, err := ri.List(ctx, metav1.ListOptions{LabelSelector: stack.OwnerLabel + "=" + owner})
		if err != nil {
			return err
		}
		for _, it := range list.Items {
			if err := ri.Delete(ctx, it.GetName(), metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
	}
	for {
		n, names, err := k.owned(ctx, ns, owner)
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("objects not gone: %s", strings.Join(names, ", "))
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// realNode returns the clients, a fresh namespace whose pods all run on the real node, and
// the name of the project's image imported there. It skips where the environment has no real
// node (make test starts one).
func requireRealNode(t *testing.T) (*kubeClients, string, string) {
	t.Helper()
	k := requireCluster(t)
	env, err := testenv.Load(filepath.Dir(os.Getenv("KUBECONFIG")))
	if err != nil || !env.Node {
		t.Skip("the environment has no real node: make test starts one (testenv up -node)")
	}
	image := env.NodeImage(stack.CubeImageRepository)
	if image == "" {
		t.Fatalf("no %s image imported into the real node (images: %v): testenv up -node -image dist/image/cube-image.tar", stack.CubeImageRepository, env.NodeImages)
	}
	ns := k.namespace(t)
	nsObj, err := k.cs.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nsObj.Annotations = testenv.RealNodeNamespace()
	if _, err := k.cs.CoreV1().Namespaces().Update(context.Background(), nsObj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	return k, ns, image
}
