// Package volcano fetches (and caches) Volcano's release manifest and installs it on a cluster that may already
// have one: it finds an existing install, installs only when asked to, tells the objects it
// created from those it took over, checks them for drift, and on uninstall deletes only what
// it created and hands the rest back. It knows nothing of Terraform.
package volcano

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"

	"github.com/elasticctr/terraform-provider-ctr/internal/kube"
	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
)

// Mode says what to do with Volcano on a cluster.
type Mode string

const (
	// IfAbsent installs the release when the cluster has no Volcano and leaves an existing
	// install alone.
	IfAbsent Mode = "if_absent"
	// Adopt installs the release, over an existing install if there is one: its objects are
	// taken over (kept, not deleted, on uninstall).
	Adopt Mode = "adopt"
	// None leaves Volcano alone altogether.
	None Mode = "none"
)

// Modes are the modes in the order the docs list them.
var Modes = []Mode{IfAbsent, Adopt, None}

// State says whose the Volcano on a cluster is.
type State string

const (
	Installed State = "installed" // installed by us, on a cluster that had none
	Adopted   State = "adopted"   // there before, taken over (Adopt)
	Existing  State = "existing"  // there, not ours: left alone
	Absent    State = "absent"    // none, and none installed (None)
)

// Managed says whether the state is an install we manage.
func (s State) Managed() bool { return s == Installed || s == Adopted }

// Owner is the owner label value of every object we manage.
const Owner = "ctr_cluster.volcano"

// Annotations on every object we manage: which release, from where, so that an import reads
// back the release and its objects; and on the objects that were there before, that they were
// (they are handed back, not deleted, on uninstall).
const (
	VersionAnnotation  = "ctr.elasticctr.io/volcano-version"
	ManifestAnnotation = "ctr.elasticctr.io/volcano-manifest-url"
	AdoptedAnnotation  = "ctr.elasticctr.io/volcano-adopted"
)

// SchedulerNamespace and SchedulerName name the scheduler Deployment of a release, whose
// image tag tells the version of an install that is not ours.
const (
	SchedulerNamespace = "volcano-system"
	SchedulerName      = "volcano-scheduler"
)

// JobsCRD is the object that tells whether a cluster has Volcano: its Job CRD, which every
// release has and every training job needs.
func JobsCRD() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("apiextensions.k8s.io/v1")
	u.SetKind("CustomResourceDefinition")
	u.SetName("jobs." + batchv1alpha1.SchemeGroupVersion.Group)
	return u
}

func scheduler() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("apps/v1")
	u.SetKind("Deployment")
	u.SetNamespace(SchedulerNamespace)
	u.SetName(SchedulerName)
	return u
}

// Release is a Volcano release manifest and where it came from.
type Release struct {
	Version     string
	ManifestURL string
	Registry    string // image registry every image is moved to ("" keeps them)
}

// Found is what a cluster has of Volcano.
type Found struct {
	Present bool
	Ours    bool   // its Job CRD carries our owner label
	Adopted bool   // ours, and there before we took it over
	Version string // our release annotation, else the scheduler's image tag; "" when neither says
	URL     string // our manifest annotation
}

// Detect looks for Volcano: its Job CRD, or its scheduler Deployment.
func Detect(ctx context.Context, c *kube.Client) (Found, error) {
	var f Found
	crd, err := c.Get(ctx, JobsCRD())
	if err != nil {
		return f, err
	}
	sched, err := c.Get(ctx, scheduler())
	if err != nil {
		return f, err
	}
	f.Present = crd != nil || sched != nil
	if crd != nil && crd.GetLabels()[stack.OwnerLabel] == Owner {
		a := crd.GetAnnotations()
		f.Ours, f.Adopted, f.Version, f.URL = true, a[AdoptedAnnotation] == "true", a[VersionAnnotation], a[ManifestAnnotation]
	}
	if f.Version == "" && sched != nil {
		f.Version = imageTag(sched)
	}
	return f, nil
}

// imageTag is the tag of the scheduler container's image ("" when it has none, or a digest).
func imageTag(d *unstructured.Unstructured) string {
	containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	for _, c := range containers {
		m, _ := c.(map[string]any)
		img, _ := m["image"].(string)
		if !strings.Contains(img, "scheduler") {
			continue
		}
		if i := strings.LastIndex(img, ":"); i > strings.LastIndex(img, "/") && !strings.Contains(img, "@") {
			return img[i+1:]
		}
	}
	return ""
}

// Objects are the keys (kube.ManifestKey) of the objects we manage: those we created, which
// uninstall deletes, and those that were there before, which it hands back.
type Objects struct {
	Created []string
	Adopted []string
}

func (o Objects) adopted() map[string]bool {
	m := map[string]bool{}
	for _, k := range o.Adopted {
		m[k] = true
	}
	return m
}

func (o Objects) all() map[string]bool {
	m := o.adopted()
	for _, k := range o.Created {
		m[k] = true
	}
	return m
}

// Set parses a release manifest into the objects to apply: labelled as ours, annotated with
// the release, images moved to the release's registry.
func Set(data []byte, rel Release) (stack.Set, error) {
	set, err := kube.ParseManifest(data, map[string]string{stack.LabelManagedBy: stack.ManagedBy, stack.OwnerLabel: Owner})
	if err != nil {
		return nil, err
	}
	for _, o := range set {
		annotate(o.Object, map[string]string{VersionAnnotation: rel.Version, ManifestAnnotation: rel.ManifestURL})
	}
	stack.MirrorImages(set, rel.Registry)
	return set, nil
}

// MarkAdopted annotates the objects of set that objs says were there before we took them
// over, so that an import tells them from those we created.
func MarkAdopted(set stack.Set, objs Objects) {
	was := objs.adopted()
	for _, o := range set {
		if was[o.Key] {
			annotate(o.Object, map[string]string{AdoptedAnnotation: "true"})
		}
	}
}

func annotate(u *unstructured.Unstructured, add map[string]string) {
	a := u.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	for k, v := range add {
		a[k] = v
	}
	u.SetAnnotations(a)
}

// Keys lists the keys of a set.
func Keys(set stack.Set) []string {
	out := make([]string, len(set))
	for i, o := range set {
		out[i] = o.Key
	}
	return out
}

// Classify splits the objects of a manifest into those we created and those that were there
// before (adopted), keeping what prev says of objects we already manage and looking at the
// cluster for the others: an object that exists and is not ours yet was there before.
func Classify(ctx context.Context, c *kube.Client, set stack.Set, prev Objects) (Objects, error) {
	var out Objects
	created, adopted := Objects{Created: prev.Created}.all(), prev.adopted()
	for _, o := range set {
		switch {
		case created[o.Key]:
			out.Created = append(out.Created, o.Key)
		case adopted[o.Key]:
			out.Adopted = append(out.Adopted, o.Key)
		default:
			live, err := c.Get(ctx, o.Object)
			if err != nil && !kube.IsNotServed(err) {
				return out, err
			}
			if live != nil {
				out.Adopted = append(out.Adopted, o.Key)
			} else {
				out.Created = append(out.Created, o.Key)
			}
		}
	}
	return out, nil
}

// Install applies a release whose objects Classify split (set from Set with objs.Adopted),
// removes what prev managed that the release no longer has (deletes what we created, hands
// back what we adopted: an upgrade), and waits until its CRDs are established and its
// Deployments available. On error, the objects we manage are what it returns.
func Install(ctx context.Context, c *kube.Client, set stack.Set, objs, prev Objects) (Objects, error) {
	if _, err := c.Apply(ctx, set); err != nil {
		// What prev managed and the release dropped is still there, and still ours.
		return merge(objs, prev), fmt.Errorf("apply the Volcano manifest: %w", err)
	}
	keep := objs.all()
	stale := Objects{Created: notIn(prev.Created, keep), Adopted: notIn(prev.Adopted, keep)}
	if err := Uninstall(ctx, c, stale); err != nil {
		return merge(objs, stale), fmt.Errorf("remove objects the release no longer has: %w", err)
	}
	if err := c.WaitInstalled(ctx, set); err != nil {
		return objs, fmt.Errorf("wait for its CRDs and Deployments: %w", err)
	}
	return objs, nil
}

// notIn are the keys of ks that set does not hold, in order.
func notIn(ks []string, set map[string]bool) []string {
	var out []string
	for _, k := range ks {
		if !set[k] {
			out = append(out, k)
		}
	}
	return out
}

func merge(a, b Objects) Objects {
	seen := a.all()
	a.Created = append(a.Created, notIn(b.Created, seen)...)
	a.Adopted = append(a.Adopted, notIn(b.Adopted, seen)...)
	return a
}

// ownership is what we put on an object to manage it, and take off to hand it back.
var (
	ownLabels      = []string{stack.OwnerLabel, stack.LabelManagedBy}
	ownAnnotations = []string{VersionAnnotation, ManifestAnnotation, AdoptedAnnotation}
)

// HandBack hands objects back: our labels and annotations come off, nothing else changes.
func HandBack(ctx context.Context, c *kube.Client, keys []string) error {
	for _, k := range keys {
		u := kube.RefFromManifestKey(k)
		if u == nil {
			continue
		}
		if err := c.RemoveMetadata(ctx, u, ownLabels, ownAnnotations); err != nil {
			return err
		}
	}
	return nil
}

// Uninstall hands back the objects that were there before we took them over, then deletes
// the objects we created (in reverse install order) and waits until they are gone. A CRD
// that was there before is never deleted, and so neither are the resources of its kind.
func Uninstall(ctx context.Context, c *kube.Client, objs Objects) error {
	if err := HandBack(ctx, c, objs.Adopted); err != nil {
		return err
	}
	var set stack.Set
	for _, k := range objs.Created {
		if u := kube.RefFromManifestKey(k); u != nil {
			set = append(set, stack.Object{Key: k, Object: u})
		}
	}
	return c.DeleteSet(ctx, set)
}

// Drift compares the objects we manage with the release: one line per object that is gone
// or whose fields differ ("<key>: <field>, ...").
func Drift(ctx context.Context, c *kube.Client, set stack.Set, objs Objects) ([]string, error) {
	managed := objs.all()
	var ours stack.Set
	for _, o := range set {
		if managed[o.Key] {
			ours = append(ours, o)
		}
	}
	return c.Drift(ctx, ours)
}
