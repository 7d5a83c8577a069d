package volcano

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/elasticctr/terraform-provider-ctr/internal/kube"
	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
)

// realManifest is the vendored release manifest (see testdata/README.md).
const realManifest = "testdata/volcano-development-v1.14.1.yaml"

func readReal(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile(realManifest)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	if got := hex.EncodeToString(sum[:]); got != "f6ffcb7558d4c2ffbbb3a537141daeecc3d114e747c273d0db9b933fb38aa182" {
		t.Fatalf("%s is not the published release (sha256 %s): see testdata/README.md", realManifest, got)
	}
	return data
}

// TestSetRealRelease: the published manifest parses into the objects a Volcano install has,
// CRDs first and webhooks last, every one labelled and annotated as ours, images mirrored.
func TestSetRealRelease(t *testing.T) {
	set, err := Set(readReal(t), Release{Version: "v1.14.1", ManifestURL: "file:///m.yaml", Registry: "mirror.example:5000"})
	if err != nil {
		t.Fatal(err)
	}
	keys := Keys(set)
	for _, want := range []string{
		"v1/Namespace/volcano-system",
		"apiextensions.k8s.io/v1/CustomResourceDefinition/jobs.batch.volcano.sh",
		"apiextensions.k8s.io/v1/CustomResourceDefinition/podgroups.scheduling.volcano.sh",
		"apiextensions.k8s.io/v1/CustomResourceDefinition/queues.scheduling.volcano.sh",
		"apps/v1/Deployment/volcano-system/volcano-scheduler",
		"apps/v1/Deployment/volcano-system/volcano-controllers",
		"apps/v1/Deployment/volcano-system/volcano-admission",
		"batch/v1/Job/volcano-system/volcano-admission-init",
		"admissionregistration.k8s.io/v1/MutatingWebhookConfiguration/volcano-admission-service-jobs-mutate",
	} {
		if !slices.Contains(keys, want) {
			t.Errorf("the release has no %s", want)
		}
	}
	if set[0].Object.GetKind() != "Namespace" || set[len(set)-1].Object.GetKind() != "ValidatingWebhookConfiguration" {
		t.Errorf("install order: first %s, last %s", set[0].Key, set[len(set)-1].Key)
	}
	for _, o := range set {
		if o.Object.GetLabels()[stack.OwnerLabel] != Owner || o.Object.GetAnnotations()[VersionAnnotation] != "v1.14.1" {
			t.Errorf("%s is not marked as ours: %v %v", o.Key, o.Object.GetLabels(), o.Object.GetAnnotations())
		}
	}
	sched := set.Find("apps/v1/Deployment/volcano-system/volcano-scheduler")
	if sched == nil || !strings.HasPrefix(imageTag(sched)+"|"+containerImage(sched), "v1.14.0|mirror.example:5000/") {
		t.Errorf("scheduler image: %q (tag %q), want the release's v1.14.0 from the mirror", containerImage(sched), imageTag(sched))
	}
}

func containerImage(d interface{ UnstructuredContent() map[string]any }) string {
	c := d.UnstructuredContent()["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)
	return c[0].(map[string]any)["image"].(string)
}

// TestMarkAdopted: only the objects that were there before are annotated as taken over.
func TestMarkAdopted(t *testing.T) {
	set, err := Set(readReal(t), Release{Version: "v", ManifestURL: "u"})
	if err != nil {
		t.Fatal(err)
	}
	crd := "apiextensions.k8s.io/v1/CustomResourceDefinition/jobs.batch.volcano.sh"
	MarkAdopted(set, Objects{Adopted: []string{crd}})
	for _, o := range set {
		if got := o.Object.GetAnnotations()[AdoptedAnnotation] == "true"; got != (o.Key == crd) {
			t.Errorf("%s adopted mark: %v", o.Key, got)
		}
	}
}

// TestRealReleaseNoFalseDrift: every object of the release, as the API server returns it
// (numbers as int64 rather than YAML's float64, fields the server adds), shows no drift; a
// field someone changed does.
func TestRealReleaseNoFalseDrift(t *testing.T) {
	set, err := Set(readReal(t), Release{Version: "v", ManifestURL: "u"})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range set {
		live := o.Object.DeepCopy()
		data, _ := live.MarshalJSON()
		if err := live.UnmarshalJSON(data); err != nil { // JSON numbers -> int64, as from the server
			t.Fatal(err)
		}
		live.SetResourceVersion("42")
		live.SetUID("u-1")
		live.Object["status"] = map[string]any{"observedGeneration": int64(3)}
		if f := kube.DriftedFields(o.Object, live); len(f) > 0 {
			t.Errorf("%s: drift against itself: %v", o.Key, f)
		}
	}
	sched := set.Find("apps/v1/Deployment/volcano-system/volcano-scheduler")
	live := sched.DeepCopy()
	live.Object["spec"].(map[string]any)["replicas"] = int64(0)
	if f := kube.DriftedFields(sched, live); !slices.Equal(f, []string{"spec.replicas"}) {
		t.Errorf("scaled scheduler: drift %v, want [spec.replicas]", f)
	}
}
