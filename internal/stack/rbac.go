package stack

import (
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// WorkloadsRoleName is the name the RBAC guide gives the ClusterRole that
// WorkloadsClusterRole renders.
const WorkloadsRoleName = "ctr-workloads"

// The API server's proxies the provider reads status ports through (get).
const (
	PodProxy     = "pods/proxy"
	ServiceProxy = "services/proxy"
)

// What the provider does with each object, as API verbs. Server-side apply is a patch that
// creates the object when it is missing; refresh, drift and import get; prune lists by the
// owner label; the waits list and watch.
var (
	verbsOwned    = []string{"create", "delete", "get", "list", "patch", "watch"}
	verbsObserved = []string{"get", "list", "watch"}
	// The readiness checks read the cube's and serving's HTTP status through the API
	// server's proxy, so that Terraform needs no route into the cluster.
	proxied = []string{PodProxy, ServiceProxy}
	// The cube's rollout replaces its servers' pods through the eviction API (kube.RollOut),
	// so that their PodDisruptionBudgets guard it.
	evictions = "pods/eviction"
)

// WorkloadsClusterRole is every permission ctr_training_job, ctr_cube and ctr_serving need in
// the namespace they manage, derived from the kinds they render (TrainingJobKinds, CubeKinds,
// ServingKinds) and the kinds controllers make of them (ControllerKinds). It is a ClusterRole
// so that one definition serves every namespace, each granting it with a RoleBinding. The
// training job's own Role grants its pods a subset of these, which RBAC requires the
// identity creating it to hold.
func WorkloadsClusterRole() *rbacv1.ClusterRole {
	byGroup := map[string]map[string][]string{} // group -> resource -> verbs
	add := func(kinds []schema.GroupVersionKind, verbs []string) {
		for _, k := range kinds {
			plural, _ := apimeta.UnsafeGuessKindToResource(k)
			if byGroup[k.Group] == nil {
				byGroup[k.Group] = map[string][]string{}
			}
			byGroup[k.Group][plural.Resource] = verbUnion(byGroup[k.Group][plural.Resource], verbs)
		}
	}
	add(TrainingJobKinds, verbsOwned)
	add(CubeKinds, verbsOwned)
	add(ServingKinds, verbsOwned)
	add(ControllerKinds, verbsObserved)
	for _, sub := range proxied {
		byGroup[""][sub] = []string{"get"}
	}
	byGroup[""][evictions] = []string{"create"}
	// One rule per group and verb list, in a stable order.
	var rules []rbacv1.PolicyRule
	for _, group := range sortedKeys(byGroup) {
		byVerbs := map[string]*rbacv1.PolicyRule{}
		var order []string
		for _, res := range sortedKeys(byGroup[group]) {
			verbs := byGroup[group][res]
			key := strings.Join(verbs, ",")
			if byVerbs[key] == nil {
				byVerbs[key] = &rbacv1.PolicyRule{APIGroups: []string{group}, Verbs: verbs}
				order = append(order, key)
			}
			byVerbs[key].Resources = append(byVerbs[key].Resources, res)
		}
		for _, key := range order {
			rules = append(rules, *byVerbs[key])
		}
	}
	return &rbacv1.ClusterRole{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
		ObjectMeta: metav1.ObjectMeta{Name: WorkloadsRoleName},
		Rules:      rules,
	}
}

func verbUnion(a, b []string) []string {
	out := slices.Concat(a, b)
	slices.Sort(out)
	return slices.Compact(out)
}
