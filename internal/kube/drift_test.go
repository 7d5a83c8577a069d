package kube

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
)

func obj(t *testing.T, y string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	require.NoError(t, yaml.Unmarshal([]byte(y), &u.Object))
	return u
}

const desiredDeploy = `
apiVersion: apps/v1
kind: Deployment
metadata: {name: fs, namespace: ns, labels: {a: "1"}}
spec:
  replicas: 1
  template:
    spec:
      containers:
      - name: fs
        image: img:1
        env:
        - {name: A, value: "1"}
        - {name: B, value: "2"}
`

func TestProject_NoDriftGivesIdenticalYAML(t *testing.T) {
	desired := obj(t, desiredDeploy)
	// What the API server returns: defaults, status and server metadata added.
	live := obj(t, `
apiVersion: apps/v1
kind: Deployment
metadata: {name: fs, namespace: ns, labels: {a: "1"}, uid: x, resourceVersion: "7", generation: 2, managedFields: [{manager: m}]}
spec:
  replicas: 1
  progressDeadlineSeconds: 600
  strategy: {type: RollingUpdate}
  template:
    spec:
      dnsPolicy: ClusterFirst
      containers:
      - name: fs
        image: img:1
        imagePullPolicy: IfNotPresent
        terminationMessagePath: /dev/termination-log
        env:
        - {name: A, value: "1"}
        - {name: B, value: "2"}
status: {availableReplicas: 1}
`)
	want, err := stack.YAML(desired)
	require.NoError(t, err)
	got, err := stack.YAML(Project(desired, live))
	require.NoError(t, err)
	assert.Equal(t, want, got)
}

func TestProject_ShowsDrift(t *testing.T) {
	desired := obj(t, desiredDeploy)
	live := obj(t, `
apiVersion: apps/v1
kind: Deployment
metadata: {name: fs, namespace: ns}
spec:
  replicas: 3
  template:
    spec:
      containers:
      - name: fs
        image: img:1
        env:
        - {name: B, value: "2"}
        - {name: INJECTED, value: "x"}
`)
	p := Project(desired, live)
	replicas, _, _ := unstructured.NestedFieldNoCopy(p.Object, "spec", "replicas")
	assert.EqualValues(t, 3, replicas, "changed field shows its live value")
	_, found, _ := unstructured.NestedStringMap(p.Object, "metadata", "labels")
	assert.False(t, found, "a removed label map is missing from the projection")
	containers, _, _ := unstructured.NestedSlice(p.Object, "spec", "template", "spec", "containers")
	env := containers[0].(map[string]any)["env"].([]any)
	require.Len(t, env, 2, "a removed env var is gone and an added one shows")
	assert.Equal(t, "B", env[0].(map[string]any)["name"])
	assert.Equal(t, "INJECTED", env[1].(map[string]any)["name"])
}

func TestProject_SecretDriftIsMarkedNotShown(t *testing.T) {
	desired := obj(t, `{apiVersion: v1, kind: Secret, metadata: {name: s}, data: {K: c2VjcmV0, L: b3RoZXI=}}`)
	live := obj(t, `{apiVersion: v1, kind: Secret, metadata: {name: s}, data: {K: Y2hhbmdlZA==, L: b3RoZXI=}, type: Opaque}`)
	y, err := stack.YAML(Project(desired, live))
	require.NoError(t, err)
	assert.Contains(t, y, "K: "+stack.DriftedValue)
	assert.Contains(t, y, "L: "+stack.SensitiveValue)
	assert.NotContains(t, y, "Y2hhbmdlZA")
	assert.NotContains(t, y, "b3RoZXI")
}
