package provider

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
)

// drainChecks drain the e2e stack's cube of 2 shards × 2 replicas, every replica on the one
// real node (the spread is a preference, so sharing a node schedules), as `kubectl drain`
// does it: every cube pod of the node evicted through the eviction API (policy/v1 Eviction).
// Each shard's PodDisruptionBudget selects exactly that shard's two pods; in the first pass it
// lets one replica per shard go and refuses the other (429), so every shard still answers
// every key; the drain then retries until each evicted replica's replacement is Ready, and
// completes (no eviction is refused for good), with every shard keeping a Ready replica the
// whole time and answering every key at the end. Part of TestAccRealNode/ReplicaComesBack,
// which shares the stack.
func (k *kubeClients) drainChecks(t *testing.T, ns, image string, gen int) resource.TestCheckFunc {
	cube := stack.Cube{Name: "e2e-cube", Namespace: ns, Shards: 2, Replicas: 2}
	return resource.ComposeTestCheckFunc(
		k.shardBudgetsReady(ns, cube, time.Minute),
		k.drain(t, ns, cube, image, gen, 5*time.Minute),
		k.lookupJob(t, ns, image, "lookup-drained", gen))
}

// shardPods are the pods of one shard of cube that are not being deleted, and how many of
// them are Ready.
func (k *kubeClients) shardPods(ctx context.Context, cube stack.Cube, i int32) (pods []corev1.Pod, ready int, err error) {
	list, err := k.cs.CoreV1().Pods(cube.Namespace).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(cube.ShardSelector(i)).String()})
	if err != nil {
		return nil, 0, err
	}
	for _, p := range list.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		pods = append(pods, p)
		if podReady(p) {
			ready++
		}
	}
	return pods, ready, nil
}

func podReady(p corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// shardBudgetsReady waits until the disruption controller has read every shard's budget
// (one disruption allowed, every replica healthy), and checks that each budget's selector
// picks exactly its shard's pods among all the pods of the namespace.
func (k *kubeClients) shardBudgetsReady(ns string, cube stack.Cube, timeout time.Duration) resource.TestCheckFunc {
	return func(*terraform.State) error {
		ctx := context.Background()
		all, err := k.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for i := range cube.Shards {
			name := cube.ShardService(i)
			var pdb *policyv1.PodDisruptionBudget
			err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
				pdb, err = k.cs.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return false, nil
				}
				s := pdb.Status
				return s.ObservedGeneration == pdb.Generation && s.DisruptionsAllowed == 1 && s.CurrentHealthy == cube.Replicas && s.ExpectedPods == cube.Replicas, nil
			})
			if err != nil {
				return fmt.Errorf("PodDisruptionBudget %s/%s did not allow one disruption of %d healthy pods within %s: %w; status: %+v", ns, name, cube.Replicas, timeout, err, pdbStatus(pdb))
			}
			sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
			if err != nil {
				return err
			}
			var got, want []string
			for _, p := range all.Items {
				if sel.Matches(labels.Set(p.Labels)) {
					got = append(got, p.Name)
				}
				if p.Labels[stack.ShardLabel] == strconv.Itoa(int(i)) && p.Labels[stack.LabelInstance] == cube.Name {
					want = append(want, p.Name)
				}
			}
			sort.Strings(got)
			sort.Strings(want)
			if fmt.Sprint(got) != fmt.Sprint(want) || len(want) != int(cube.Replicas) {
				return fmt.Errorf("PodDisruptionBudget %s selects %v, want shard %d's %d pods %v", name, got, i, cube.Replicas, want)
			}
		}
		return nil
	}
}

func pdbStatus(pdb *policyv1.PodDisruptionBudget) any {
	if pdb == nil {
		return "not found"
	}
	return pdb.Status
}

// evict asks the eviction API to evict pod: nil when it was evicted, refused when a budget
// refused it (429), or another error.
func (k *kubeClients) evict(ctx context.Context, ns string, pod corev1.Pod) (refused bool, err error) {
	err = k.cs.PolicyV1().Evictions(ns).Evict(ctx, &policyv1.Eviction{
		ObjectMeta:    metav1.ObjectMeta{Name: pod.Name, Namespace: ns},
		DeleteOptions: &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pod.UID}},
	})
	switch {
	case err == nil:
		return false, nil
	case apierrors.IsTooManyRequests(err):
		return true, nil
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		return false, nil // gone already, or a replacement of the same name
	}
	return false, err
}

// drain evicts every cube pod of the node (the cube's servers and transfer, all on the real
// node) the way `kubectl drain` does: a first pass, which must evict exactly one replica of
// each shard and be refused the other, and every shard answers a lookup while its other
// replica is away; then retries every second until each original pod is evicted. Throughout,
// every shard has a Ready replica that is not being deleted.
func (k *kubeClients) drain(t *testing.T, ns string, cube stack.Cube, image string, gen int, timeout time.Duration) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		ctx := context.Background()
		node := ""
		pending := map[types.UID]corev1.Pod{} // the pods of the drained node not evicted yet
		for i := range cube.Shards {
			// Readiness follows what the transfer reports by a probe period or two.
			var pods []corev1.Pod
			var ready int
			err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
				var err error
				pods, ready, err = k.shardPods(ctx, cube, i)
				return err == nil && len(pods) == int(cube.Replicas) && ready == int(cube.Replicas), nil
			})
			if err != nil {
				return fmt.Errorf("shard %d has %d pods, %d Ready; want %d of each before the drain: %w", i, len(pods), ready, cube.Replicas, err)
			}
			for _, p := range pods {
				if node == "" {
					node = p.Spec.NodeName
				}
				if p.Spec.NodeName != node {
					return fmt.Errorf("pod %s is on node %q, not %q: the test drains one node that has every replica", p.Name, p.Spec.NodeName, node)
				}
				pending[p.UID] = p
			}
		}
		transfer, err := k.runningPods(ctx, ns, map[string]string{stack.LabelInstance: cube.Name, stack.LabelComponent: "cube-transfer"})
		if err != nil {
			return err
		}
		for _, p := range transfer {
			pending[p.UID] = p
		}
		t.Logf("draining node %s of %d cube pods", node, len(pending))

		// Every shard keeps a Ready replica: watched on its own until the drain ends.
		watchCtx, stopWatch := context.WithCancel(ctx)
		lost := make(chan string, 1)
		watched := make(chan struct{})
		go func() {
			defer close(watched)
			_ = wait.PollUntilContextCancel(watchCtx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
				for i := range cube.Shards {
					_, ready, err := k.shardPods(ctx, cube, i)
					if err == nil && ready == 0 {
						lost <- fmt.Sprintf("shard %d had no Ready replica at %s", i, time.Now().Format(time.RFC3339Nano))
						return true, nil
					}
				}
				return false, nil
			})
		}()
		stop := func() error {
			stopWatch()
			<-watched
			select {
			case msg := <-lost:
				return fmt.Errorf("the drain took a whole shard away: %s", msg)
			default:
				return nil
			}
		}

		// The first pass, as fast as the API answers.
		evictedPerShard := map[string]int{}
		refusedPerShard := map[string]int{}
		for _, uid := range sortedUIDs(pending) {
			p := pending[uid]
			refused, err := k.evict(ctx, ns, p)
			if err != nil {
				_ = stop()
				return fmt.Errorf("evict %s: %w", p.Name, err)
			}
			shard, isServer := p.Labels[stack.ShardLabel]
			switch {
			case refused && !isServer:
				_ = stop()
				return fmt.Errorf("evicting the transfer %s was refused: no budget should cover it", p.Name)
			case refused:
				refusedPerShard[shard]++
			default:
				evictedPerShard[shard]++
				delete(pending, uid)
			}
		}
		t.Logf("first pass: evicted %v, refused %v (by shard; \"\" is the transfer)", evictedPerShard, refusedPerShard)
		for i := range cube.Shards {
			shard := strconv.Itoa(int(i))
			if evictedPerShard[shard] != 1 || refusedPerShard[shard] != int(cube.Replicas)-1 {
				time.Sleep(5 * time.Second) // for the watch to see what the evictions did
				return fmt.Errorf("first pass on shard %s: %d evicted, %d refused; want 1 evicted and %d refused (maxUnavailable 1); %v",
					shard, evictedPerShard[shard], refusedPerShard[shard], cube.Replicas-1, stop())
			}
		}
		// Each shard answers with its evicted replica away.
		if err := k.lookupJob(t, ns, image, "lookup-draining", gen)(s); err != nil {
			_ = stop()
			return fmt.Errorf("during the drain: %w", err)
		}

		// The drain goes on until every pod of the node is evicted: refused evictions are
		// allowed once the replacements are Ready.
		start := time.Now()
		err = wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
			for _, uid := range sortedUIDs(pending) {
				refused, err := k.evict(ctx, ns, pending[uid])
				if err != nil {
					return false, err
				}
				if !refused {
					t.Logf("evicted %s after %s", pending[uid].Name, time.Since(start).Round(100*time.Millisecond))
					delete(pending, uid)
				}
			}
			return len(pending) == 0, nil
		})
		if serr := stop(); serr != nil {
			return serr
		}
		if err != nil {
			var left []string
			for _, p := range pending {
				left = append(left, p.Name)
			}
			return fmt.Errorf("the drain did not finish within %s (still refused: %v): %w", timeout, left, err)
		}
		return nil
	}
}

// sortedUIDs are the keys of pods in the order of the pods' names (shard 0's replicas
// first), so that a pass is reproducible.
func sortedUIDs(pods map[types.UID]corev1.Pod) []types.UID {
	out := make([]types.UID, 0, len(pods))
	for uid := range pods {
		out = append(out, uid)
	}
	sort.Slice(out, func(a, b int) bool { return pods[out[a]].Name < pods[out[b]].Name })
	return out
}

// checkShardBudgets checks that each shard of cube has a live PodDisruptionBudget (want) that
// lets one replica go and selects exactly that shard's live pods, with the spread on their
// template; or that the cube has no budget at all (!want).
func (k *kubeClients) checkShardBudgets(cube stack.Cube, want bool) resource.TestCheckFunc {
	return func(*terraform.State) error {
		ctx := context.Background()
		ns := cube.Namespace
		owned := metav1.ListOptions{LabelSelector: labels.SelectorFromSet(map[string]string{stack.OwnerLabel: stack.Owner(stack.CubeType, cube.Name)}).String()}
		if !want {
			// A pruned budget may still be listed for a moment while the garbage collector
			// finishes its deletion.
			var list *policyv1.PodDisruptionBudgetList
			err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
				var err error
				list, err = k.cs.PolicyV1().PodDisruptionBudgets(ns).List(ctx, owned)
				return err == nil && len(list.Items) == 0, err
			})
			if err != nil && list != nil && len(list.Items) > 0 {
				return fmt.Errorf("cube %s/%s still has %d PodDisruptionBudgets (%s ...) 30 s after the apply, want none", ns, cube.Name, len(list.Items), list.Items[0].Name)
			}
			return err
		}
		list, err := k.cs.PolicyV1().PodDisruptionBudgets(ns).List(ctx, owned)
		if err != nil {
			return err
		}
		if len(list.Items) != int(cube.Shards) {
			return fmt.Errorf("cube %s/%s has %d PodDisruptionBudgets, want one per shard (%d)", ns, cube.Name, len(list.Items), cube.Shards)
		}
		all, err := k.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for i := range cube.Shards {
			pdb, err := k.cs.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, cube.ShardService(i), metav1.GetOptions{})
			if err != nil {
				return err
			}
			if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != stack.ShardMaxUnavailable {
				return fmt.Errorf("PodDisruptionBudget %s: maxUnavailable %v, want %d", pdb.Name, pdb.Spec.MaxUnavailable, stack.ShardMaxUnavailable)
			}
			sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
			if err != nil {
				return err
			}
			var got []string
			for _, p := range all.Items {
				if sel.Matches(labels.Set(p.Labels)) {
					got = append(got, p.Name)
				}
			}
			sort.Strings(got)
			var wantPods []string
			for r := range cube.Replicas {
				wantPods = append(wantPods, fmt.Sprintf("%s-%d", cube.ShardService(i), r))
			}
			if fmt.Sprint(got) != fmt.Sprint(wantPods) {
				return fmt.Errorf("PodDisruptionBudget %s selects the pods %v, want %v", pdb.Name, got, wantPods)
			}
			sts, err := k.cs.AppsV1().StatefulSets(ns).Get(ctx, cube.ShardService(i), metav1.GetOptions{})
			if err != nil {
				return err
			}
			spec := sts.Spec.Template.Spec
			if spec.Affinity == nil || spec.Affinity.PodAntiAffinity == nil || len(spec.TopologySpreadConstraints) != 1 {
				return fmt.Errorf("StatefulSet %s: no anti-affinity or topology spread among its replicas", sts.Name)
			}
		}
		return nil
	}
}

// shardWatcher looks at the shards of a cube every 100 ms from its start, and records each
// moment one of them had no Ready replica.
type shardWatcher struct {
	k     *kubeClients
	cube  stack.Cube
	stop  chan struct{}
	done  chan struct{}
	mu    sync.Mutex
	lost  []string
	looks int
}

// watchShardsServing starts a shardWatcher on cube; check stops it.
func (k *kubeClients) watchShardsServing(t *testing.T, cube stack.Cube) *shardWatcher {
	w := &shardWatcher{k: k, cube: cube, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			select {
			case <-w.stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			for i := range cube.Shards {
				_, ready, err := k.shardPods(context.Background(), cube, i)
				w.mu.Lock()
				w.looks++
				if err == nil && ready == 0 {
					w.lost = append(w.lost, fmt.Sprintf("%s shard %d had no Ready replica", time.Now().Format("15:04:05.000"), i))
				}
				w.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		select {
		case <-w.stop:
		default:
			close(w.stop)
		}
		<-w.done
	})
	return w
}

// check stops the watcher and fails if a shard was ever without a Ready replica, or if any
// pod of the cube lacks the pod annotation key=value (the rollout is not finished).
func (w *shardWatcher) check(key, value string) error {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
	if len(w.lost) > 0 {
		return fmt.Errorf("the rollout took the last serving replica of a shard (%d of %d looks): %s", len(w.lost), w.looks, strings.Join(w.lost, "; "))
	}
	for i := range w.cube.Shards {
		pods, _, err := w.k.shardPods(context.Background(), w.cube, i)
		if err != nil {
			return err
		}
		if len(pods) != int(w.cube.Replicas) {
			return fmt.Errorf("shard %d has %d pods, want %d", i, len(pods), w.cube.Replicas)
		}
		for _, p := range pods {
			if p.Annotations[key] != value {
				return fmt.Errorf("pod %s runs the old template (annotation %s = %q) after the apply", p.Name, key, p.Annotations[key])
			}
		}
	}
	return nil
}
