package stack

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// objectRef is a reference that a rendered object makes to another object of its namespace.
type objectRef struct{ kind, name, at string }

// refFields are the fields that name another object: by their value (a name of the kind),
// by a "name" inside them, or by a "kind" and a "name" inside them (kind "").
var refFields = map[string]string{
	"serviceAccountName": "ServiceAccount", "claimName": "PersistentVolumeClaim", "secretName": "Secret",
	"configMap": "ConfigMap", "configMapRef": "ConfigMap", "configMapKeyRef": "ConfigMap",
	"secretRef": "Secret", "secretKeyRef": "Secret", "nodePublishSecretRef": "Secret", "imagePullSecrets": "Secret",
	"roleRef": "", "subjects": "", "scaleTargetRef": "",
}

// references finds every reference anywhere in v (an object or a part of it). A pod spec
// (what has containers) that names no ServiceAccount counts as a reference to "": the API
// server would keep whatever name the deprecated serviceAccount field has from before.
func references(v any, at string) []objectRef {
	var out []objectRef
	named := func(kind string, e any, at string) {
		m, ok := e.(map[string]any)
		if !ok {
			return
		}
		if kind == "" {
			kind, _ = m["kind"].(string)
		}
		name, _ := m["name"].(string)
		out = append(out, objectRef{kind, name, at})
	}
	switch t := v.(type) {
	case map[string]any:
		if _, pod := t["containers"]; pod {
			if _, ok := t["serviceAccountName"]; !ok {
				out = append(out, objectRef{"ServiceAccount", "", at + ".serviceAccountName"})
			}
		}
		for k, e := range t {
			kind, ref := refFields[k]
			switch list, isList := e.([]any); {
			case !ref:
				out = append(out, references(e, at+"."+k)...)
			case isList:
				for i, x := range list {
					named(kind, x, fmt.Sprintf("%s.%s[%d]", at, k, i))
				}
			default:
				if s, ok := e.(string); ok {
					out = append(out, objectRef{kind, s, at + "." + k})
				} else {
					named(kind, e, at+"."+k)
				}
			}
		}
	case []any:
		for i, e := range t {
			out = append(out, references(e, fmt.Sprintf("%s[%d]", at, i))...)
		}
	}
	return out
}

// names is kind -> name -> true.
type names map[string]map[string]bool

func (n names) add(kind string, ns ...string) {
	if n[kind] == nil {
		n[kind] = map[string]bool{}
	}
	for _, s := range ns {
		if s != "" {
			n[kind][s] = true
		}
	}
}

// userSupplied are the objects that a resource's settings name, which the user keeps, and
// the ServiceAccount Kubernetes makes in every namespace.
func userSupplied(settings any) names {
	n := names{}
	n.add("ServiceAccount", DefaultServiceAccount)
	pod := func(p *PodSettings) {
		if p == nil {
			return
		}
		n.add("ServiceAccount", p.ServiceAccountName)
		for _, v := range p.Volumes {
			if v.PersistentVolumeClaim != nil {
				n.add("PersistentVolumeClaim", v.PersistentVolumeClaim.ClaimName)
			}
			if v.Secret != nil {
				n.add("Secret", v.Secret.Name)
			}
			if v.ConfigMap != nil {
				n.add("ConfigMap", v.ConfigMap.Name)
			}
			if v.CSI != nil {
				n.add("Secret", v.CSI.NodePublishSecret)
			}
		}
		for _, r := range p.SecretEnv {
			n.add("Secret", r.Secret)
		}
		for _, e := range p.EnvFrom {
			n.add("Secret", e.Secret)
			n.add("ConfigMap", e.ConfigMap)
		}
	}
	switch s := settings.(type) {
	case Cube:
		pod(s.Pod)
		n.add("Secret", s.ImagePullSecrets...)
	case Serving:
		pod(s.Pod)
		n.add("Secret", s.ImagePullSecrets...)
	case TrainingJob:
		pod(s.Pod)
		if s.FileServer != nil {
			pod(s.FileServer.Pod)
		}
		n.add("Secret", s.ImagePullSecrets...)
		if s.ModelOutput != nil {
			n.add("PersistentVolumeClaim", s.ModelOutput.ExistingClaim)
		}
		if d := s.Dataset; d != nil && d.Volume != nil {
			n.add("PersistentVolumeClaim", d.Volume.ClaimName)
		}
		if d := s.Dataset; d != nil && d.S3 != nil {
			n.add("Secret", d.S3.CredentialsSecret)
		}
	case nil: // a queue's
	default:
		panic(fmt.Sprintf("no settings type %T", settings))
	}
	return n
}

// settingsOf decodes the settings of a rendered set from its settings annotation.
func settingsOf(t *testing.T, set Set) any {
	t.Helper()
	for _, o := range set {
		s, ok := o.Object.GetAnnotations()[SettingsAnnotation]
		if !ok {
			continue
		}
		typ, _, _ := strings.Cut(o.Object.GetLabels()[OwnerLabel], ".")
		var v any
		var err error
		switch typ {
		case CubeType:
			v, err = CubeFromSettings(s)
		case ServingType:
			v, err = ServingFromSettings(s)
		case TrainingJobType:
			v, err = TrainingJobFromSettings(s)
		default:
			t.Fatalf("%s: owner type %q", o.Key, typ)
		}
		require.NoError(t, err, o.Key)
		return v
	}
	for _, o := range set {
		if o.Object.GetKind() != kindQueue.Kind {
			t.Fatalf("%s: no object of the set carries the settings annotation", o.Key)
		}
	}
	return nil // a queue: its settings name no object
}

// checkReferences fails t on each of set's dangling references (see dangling) and returns
// every reference.
func checkReferences(t *testing.T, what string, set Set, user names) []objectRef {
	t.Helper()
	problems, all := dangling(set, user)
	for _, p := range problems {
		t.Errorf("%s: %s", what, p)
	}
	return all
}

// dangling says which references of set name neither an object the set applies before the
// one that names it nor one that user supplies, and returns every reference.
func dangling(set Set, user names) (problems []string, all []objectRef) {
	applied := names{}
	for _, o := range set {
		refs := references(o.Object.Object, o.Key)
		for _, r := range refs {
			switch {
			case r.name == "":
				problems = append(problems, fmt.Sprintf("%s names no %s, so a name applied before stays", r.at, r.kind))
			case applied[r.kind][r.name] || user[r.kind][r.name]:
			default:
				problems = append(problems, fmt.Sprintf("%s names the %s %q, which the same apply neither keeps (before it) nor the user supplies", r.at, r.kind, r.name))
			}
		}
		all = append(all, refs...)
		applied.add(o.Object.GetKind(), o.Object.GetName())
	}
	return problems, all
}

// TestDangling: the check finds a reference to an object the set does not keep, one to an
// object it applies only after, and a pod template that names no ServiceAccount.
func TestDangling(t *testing.T) {
	c, set, err := Cube{Name: "cube", Namespace: "ads", DonefileURL: testDonefile, Image: "cube:1",
		Pod: &PodSettings{ServiceAccountAnnotations: map[string]string{"a": "b"}}}.Render()
	require.NoError(t, err)
	user := userSupplied(c)
	problems, _ := dangling(set, user)
	require.Empty(t, problems)

	without := func(kind string) Set {
		var out Set
		for _, o := range set {
			if o.Object.GetKind() != kind {
				out = append(out, o)
			}
		}
		return out
	}
	problems, _ = dangling(without("ServiceAccount"), user)
	assert.Len(t, problems, int(c.Shards)+1, "every StatefulSet and the transfer name the ServiceAccount: %v", problems)
	problems, _ = dangling(without("PersistentVolumeClaim"), user)
	assert.Len(t, problems, 1, "the transfer names its claim: %v", problems)
	problems, _ = dangling(append(without("Secret"), set[1]), user)
	assert.Len(t, problems, int(c.Shards)+1, "a Secret applied after the pods that mount it: %v", problems)

	unnamed := set.Find(CubeTransferKey(c.Name)).DeepCopy()
	unstructured.RemoveNestedField(unnamed.Object, "spec", "template", "spec", "serviceAccountName")
	problems, _ = dangling(Set{{Key: "x", Object: unnamed}}, user)
	assert.Contains(t, strings.Join(problems, "\n"), "names no ServiceAccount")
}

// TestEveryReferenceIsKept: in every golden file (each the whole rendering of one resource's
// settings), every reference to another object (ServiceAccount, ConfigMap, Secret, claim,
// Role, scale target) names an object that the same apply keeps, applied before the object
// that names it, or one that the settings name (the user's to keep); every pod template
// names its ServiceAccount.
func TestEveryReferenceIsKept(t *testing.T) {
	kinds := names{}
	for file, set := range goldenSets(t) {
		for _, r := range checkReferences(t, file, set, userSupplied(settingsOf(t, set))) {
			kinds.add(r.kind, r.at)
		}
	}
	for _, kind := range []string{"ServiceAccount", "Secret", "ConfigMap", "PersistentVolumeClaim", "Role", "Deployment"} {
		assert.NotEmpty(t, kinds[kind], "the walk found no reference to a %s: it does not look where they are", kind)
	}
}

// TestServiceAccountAnnotationsRemoved: pods whose service_account_annotations are removed
// (so that ctr no longer renders their ServiceAccount, which the apply prunes) name a
// ServiceAccount that the apply keeps, the namespace's default, in so many words; with the
// annotations they name the one rendered for them.
func TestServiceAccountAnnotationsRemoved(t *testing.T) {
	annotated := func() *PodSettings {
		return &PodSettings{ServiceAccountAnnotations: map[string]string{"eks.amazonaws.com/role-arn": "arn:aws:iam::123456789012:role/ctr"}}
	}
	conf := `[{"dict_name":"d","shard":1}]`
	for _, tc := range []struct {
		name   string
		sa     string // the ServiceAccount rendered with the annotations
		render func(p *PodSettings) (any, Set, error)
	}{
		{"cube", "cube", func(p *PodSettings) (any, Set, error) {
			c, set, err := Cube{Name: "cube", Namespace: "ads", DonefileURL: testDonefile, Image: "cube:1", Pod: p}.Render()
			return c, set, err
		}},
		{"file server", fileServerName("job"), func(p *PodSettings) (any, Set, error) {
			j, set, err := TrainingJob{Name: "job", Namespace: "ads", ProviderVersion: "v1.2.3", ModelExport: &ModelExport{}, FileServer: &FileServer{Pod: p}}.Render()
			return j, set, err
		}},
		{"serving", "serving", func(p *PodSettings) (any, Set, error) {
			s, set, err := Serving{Name: "serving", Namespace: "ads", CubeConf: conf, ProviderVersion: "v1.2.3", Pod: p}.Render()
			return s, set, err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			saNames := func(p *PodSettings) (rendered bool, named map[string]int) {
				settings, set, err := tc.render(p)
				require.NoError(t, err)
				named = map[string]int{}
				for _, r := range checkReferences(t, tc.name, set, userSupplied(settings)) {
					if r.kind == "ServiceAccount" && strings.HasSuffix(r.at, ".serviceAccountName") {
						named[r.name]++
					}
				}
				return set.Find(Key(ref(kindServiceAccount, "ads", tc.sa))) != nil, named
			}
			rendered, with := saNames(annotated())
			require.True(t, rendered, "the annotations render a ServiceAccount %s", tc.sa)
			assert.NotZero(t, with[tc.sa], "the pods run as it")
			assert.Zero(t, with[DefaultServiceAccount])

			rendered, without := saNames(nil)
			assert.False(t, rendered, "no annotations, no ServiceAccount of ctr's")
			assert.Zero(t, without[tc.sa], "no pod names the pruned ServiceAccount")
			assert.Equal(t, with[tc.sa], without[DefaultServiceAccount], "every pod template names the default ServiceAccount")
		})
	}
}
