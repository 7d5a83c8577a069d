package stack

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
)

// fullPod sets every knob of the pod shape; secretValue is a plain env value that must stay
// out of the settings annotation.
const secretValue = "plain-value-not-for-annotations"

func fullPod() *PodSettings {
	return &PodSettings{
		NodeSelector: map[string]string{"pool": "ctr"},
		Tolerations:  []Toleration{{Key: "dedicated", Operator: "Equal", Value: "ctr", Effect: "NoSchedule"}},
		Affinity: &Affinity{Node: &NodeAffinity{
			Required:  []NodeSelectorTerm{{MatchExpressions: []NodeRequirement{{Key: "topology.kubernetes.io/zone", Operator: "In", Values: []string{"a", "b"}}}}},
			Preferred: []PreferredTerm{{Weight: 50, MatchExpressions: []NodeRequirement{{Key: "spot", Operator: "DoesNotExist"}}}},
		}},
		ServiceAccountAnnotations: map[string]string{"eks.amazonaws.com/role-arn": "arn:aws:iam::123456789012:role/ctr"},
		Labels:                    map[string]string{"team": "ads"},
		Annotations:               map[string]string{"prometheus.io/scrape": "true"},
		PriorityClassName:         "high",
		Env:                       map[string]string{"LOG_LEVEL": secretValue},
		SecretEnv:                 map[string]KeyRef{"AWS_SECRET_ACCESS_KEY": {Secret: "s3-creds", Key: "secret_key"}},
		EnvFrom:                   []EnvFrom{{Secret: "more-creds"}, {ConfigMap: "settings", Prefix: "APP_"}},
		Volumes: []Volume{
			{Name: "dataset", PersistentVolumeClaim: &ClaimSource{ClaimName: "dataset", ReadOnly: true}},
			{Name: "certs", Secret: &SecretSource{Name: "ca"}},
			{Name: "conf", ConfigMap: &SecretSource{Name: "extra"}},
			{Name: "bucket", CSI: &CSISource{Driver: "s3.csi.aws.com", ReadOnly: true, VolumeAttributes: map[string]string{"bucketName": "ctr"}, NodePublishSecret: "s3-creds"}},
			{Name: "scratch", EmptyDir: &EmptyDirSource{Medium: "Memory", SizeLimit: "1Gi"}},
		},
		VolumeMounts: []VolumeMount{
			{Name: "dataset", MountPath: "/dataset", ReadOnly: true},
			{Name: "certs", MountPath: "/etc/ssl/extra"},
			{Name: "conf", MountPath: "/etc/app/app.conf", SubPath: "app.conf"},
			{Name: "bucket", MountPath: "/mnt/bucket"},
			{Name: "scratch", MountPath: "/scratch"},
		},
		SecurityContext: &SecurityContext{RunAsUser: ptr.To[int64](1000), RunAsGroup: ptr.To[int64](1000), FSGroup: ptr.To[int64](2000),
			RunAsNonRoot: ptr.To(true), ReadOnlyRootFilesystem: ptr.To(true)},
	}
}

func TestRenderPod_Golden(t *testing.T) {
	named := func(p *PodSettings, sa string) *PodSettings {
		p.ServiceAccountName, p.ServiceAccountAnnotations = sa, nil
		return p
	}
	golden(t, "training_pod.yaml", renderAll(t, TrainingJob{Name: "ctr", Namespace: "ads", Pod: fullPod(),
		FileServer: &FileServer{Pod: named(fullPod(), "fileserver-sa")}, ProviderVersion: "v1.2.3"}))
	golden(t, "training_pod_own_sa.yaml", renderAll(t, TrainingJob{Name: "ctr", Namespace: "ads", Pod: named(fullPod(), "training-sa"),
		FileServer: &FileServer{Pod: fullPod()}, ProviderVersion: "v1.2.3"}))
	golden(t, "cube_pod.yaml", renderCubeYAML(t, Cube{Name: "cube", Namespace: "ads", DonefileURL: testDonefile, Token: "t0k3n", Image: "cube:1", Pod: fullPod()}))
	conf := Cube{Name: "cube", Namespace: "ads", DonefileURL: testDonefile}.Defaulted().CubeConf()
	golden(t, "serving_pod.yaml", setYAML(t)(RenderServing(Serving{Name: "serving", Namespace: "ads", CubeConf: conf, Pod: fullPod()})))
}

// Every knob reaches every pod template of every resource, by the one applyPod.
func TestRenderPod_EveryPodGetsEveryKnob(t *testing.T) {
	conf := Cube{Name: "cube", Namespace: "ads", DonefileURL: testDonefile}.Defaulted().CubeConf()
	sets := map[string]func() (Set, error){
		"training": func() (Set, error) {
			return RenderTrainingJob(TrainingJob{Name: "ctr", Namespace: "ads", Pod: fullPod(), FileServer: &FileServer{Pod: fullPod()}})
		},
		"collective": func() (Set, error) {
			return RenderTrainingJob(TrainingJob{Name: "ctr", Namespace: "ads", Mode: ModeCollective, Pod: fullPod(), FileServer: &FileServer{Pod: fullPod()}})
		},
		"cube": func() (Set, error) {
			return RenderCube(Cube{Name: "cube", Namespace: "ads", DonefileURL: testDonefile, Pod: fullPod()})
		},
		"serving": func() (Set, error) {
			return RenderServing(Serving{Name: "serving", Namespace: "ads", CubeConf: conf, Pod: fullPod()})
		},
	}
	for name, render := range sets {
		t.Run(name, func(t *testing.T) {
			set, err := render()
			require.NoError(t, err)
			tmpls := podTemplates(t, set)
			require.NotEmpty(t, tmpls)
			for key, tmpl := range tmpls {
				s := tmpl.Spec
				assert.Equal(t, "ctr", s.NodeSelector["pool"], key)
				assert.Contains(t, s.Tolerations, corev1.Toleration{Key: "dedicated", Operator: "Equal", Value: "ctr", Effect: "NoSchedule"}, key)
				require.NotNil(t, s.Affinity, key)
				require.NotNil(t, s.Affinity.NodeAffinity, key)
				assert.Len(t, s.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms, 1, key)
				assert.Len(t, s.Affinity.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution, 1, key)
				assert.Equal(t, "high", s.PriorityClassName, key)
				assert.Equal(t, "ads", tmpl.Labels["team"], key)
				assert.Equal(t, "true", tmpl.Annotations["prometheus.io/scrape"], key)
				assert.NotEmpty(t, s.ServiceAccountName, key)
				assert.Equal(t, int64(1000), *s.SecurityContext.RunAsUser, key)
				assert.Equal(t, int64(2000), *s.SecurityContext.FSGroup, key)
				assert.Len(t, s.Volumes, len(tmpl.Spec.Volumes), key)
				for _, v := range fullPod().Volumes {
					assert.True(t, hasVolume(s.Volumes, v.Name), "%s: volume %s", key, v.Name)
				}
				for _, c := range s.Containers {
					assert.True(t, *c.SecurityContext.ReadOnlyRootFilesystem, key)
					assert.Len(t, c.EnvFrom, 2, key)
					assert.Contains(t, c.Env, corev1.EnvVar{Name: "LOG_LEVEL", Value: secretValue}, key)
					assert.Contains(t, c.Env, corev1.EnvVar{Name: "AWS_SECRET_ACCESS_KEY", ValueFrom: &corev1.EnvVarSource{
						SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s3-creds"}, Key: "secret_key"}}}, key)
					for _, m := range fullPod().VolumeMounts {
						assert.True(t, hasMount(c.VolumeMounts, m.MountPath), "%s: mount %s", key, m.MountPath)
					}
				}
			}
		})
	}
}

func hasVolume(vs []corev1.Volume, name string) bool {
	for _, v := range vs {
		if v.Name == name {
			return true
		}
	}
	return false
}

func hasMount(ms []corev1.VolumeMount, p string) bool {
	for _, m := range ms {
		if m.MountPath == p {
			return true
		}
	}
	return false
}

// The ServiceAccount annotations go on the ServiceAccount ctr creates; a named
// ServiceAccount replaces ctr's (and the training Role is bound to it).
func TestRenderPod_ServiceAccounts(t *testing.T) {
	set, err := RenderTrainingJob(TrainingJob{Name: "ctr", Namespace: "ads", Pod: fullPod(), FileServer: &FileServer{Pod: fullPod()}})
	require.NoError(t, err)
	for _, name := range []string{"ctr", "ctr-fileserver"} {
		sa := set.Find("v1/ServiceAccount/" + name)
		require.NotNil(t, sa, name)
		assert.Equal(t, "arn:aws:iam::123456789012:role/ctr", sa.GetAnnotations()["eks.amazonaws.com/role-arn"], name)
	}
	fs := podTemplates(t, set)["apps/v1/Deployment/ctr-fileserver"]
	assert.Equal(t, "ctr-fileserver", fs.Spec.ServiceAccountName)

	p := fullPod()
	p.ServiceAccountName, p.ServiceAccountAnnotations = "training", nil
	set, err = RenderTrainingJob(TrainingJob{Name: "ctr", Namespace: "ads", Pod: p})
	require.NoError(t, err)
	assert.Nil(t, set.Find("v1/ServiceAccount/ctr"), "a named ServiceAccount is not ctr's to create")
	rb := set.Find("rbac.authorization.k8s.io/v1/RoleBinding/ctr")
	subjects, _, _ := unstructured.NestedSlice(rb.Object, "subjects")
	assert.Equal(t, "training", subjects[0].(map[string]any)["name"], "the launcher's Role goes to the pods' ServiceAccount")
	for key, tmpl := range podTemplates(t, set) {
		if strings.Contains(key, "Job/") {
			assert.Equal(t, "training", tmpl.Spec.ServiceAccountName, key)
		}
	}

	set, err = RenderCube(Cube{Name: "cube", Namespace: "ads", DonefileURL: testDonefile})
	require.NoError(t, err)
	assert.Nil(t, set.Find("v1/ServiceAccount/cube"), "no annotations, no ServiceAccount")
}

// The settings annotation keeps env names, never values, on every resource; a secret
// reference is kept (it names a Secret, not its value). RestoreEnv gets values back from
// the pod template.
func TestPod_SettingsAnnotationHasNoEnvValues(t *testing.T) {
	conf := Cube{Name: "cube", Namespace: "ads", DonefileURL: testDonefile}.Defaulted().CubeConf()
	legacy := map[string]string{"OLD": secretValue}
	job := TrainingJob{Name: "ctr", Namespace: "ads", Pod: fullPod(), FileServer: &FileServer{Pod: fullPod()}}
	set, err := RenderTrainingJob(job)
	require.NoError(t, err)
	back := annotationRoundTrip(t, set, VolcanoJobKey("ctr"), TrainingJobFromSettings)
	assert.Equal(t, map[string]string{"LOG_LEVEL": ""}, back.Pod.Env)
	back.RestoreEnv(set.Find(VolcanoJobKey("ctr")), set.Find("apps/v1/Deployment/ctr-fileserver"))
	assert.Equal(t, job.Pod.Env, back.Pod.Env)
	assert.Equal(t, job.FileServer.Pod.Env, back.FileServer.Pod.Env)
	assert.Equal(t, job.Pod.SecretEnv, back.Pod.SecretEnv)

	set, err = RenderTrainingJob(TrainingJob{Name: "old", Namespace: "ads", Env: legacy})
	require.NoError(t, err)
	old := annotationRoundTrip(t, set, VolcanoJobKey("old"), TrainingJobFromSettings)
	old.RestoreEnv(set.Find(VolcanoJobKey("old")), nil)
	assert.Equal(t, legacy, old.Env)

	set, err = RenderCube(Cube{Name: "cube", Namespace: "ads", DonefileURL: testDonefile, Pod: fullPod()})
	require.NoError(t, err)
	cube := annotationRoundTrip(t, set, CubeTransferKey("cube"), CubeFromSettings)
	cube.RestoreEnv(set.Find(CubeTransferKey("cube")))
	assert.Equal(t, fullPod().Env, cube.Pod.Env)

	set, err = RenderServing(Serving{Name: "serving", Namespace: "ads", CubeConf: conf, Env: legacy})
	require.NoError(t, err)
	srv := annotationRoundTrip(t, set, ServingDeploymentKey("serving"), ServingFromSettings)
	srv.RestoreEnv(set.Find(ServingDeploymentKey("serving")))
	assert.Equal(t, legacy, srv.Env)
}

func annotationRoundTrip[T any](t *testing.T, set Set, key string, decode func(string) (T, error)) T {
	t.Helper()
	obj := set.Find(key)
	require.NotNil(t, obj, key)
	ann := obj.GetAnnotations()[SettingsAnnotation]
	assert.NotContains(t, ann, secretValue, "an env value in the settings annotation of %s", key)
	v, err := decode(ann)
	require.NoError(t, err)
	return v
}

// The deprecated resource-level attributes render exactly as their pod counterparts.
func TestPod_LegacyAliases(t *testing.T) {
	tol := []Toleration{{Key: "k", Operator: "Exists"}}
	sc := &SecurityContext{RunAsUser: ptr.To[int64](7)}
	pods := func(set Set, err error) map[string]corev1.PodTemplateSpec {
		require.NoError(t, err)
		return podTemplates(t, set)
	}
	assert.Equal(t,
		pods(RenderCube(Cube{Name: "c", Namespace: "n", DonefileURL: testDonefile, Token: "t", NodeSelector: map[string]string{"a": "b"}, Tolerations: tol, SecurityContext: sc})),
		pods(RenderCube(Cube{Name: "c", Namespace: "n", DonefileURL: testDonefile, Token: "t", Pod: &PodSettings{NodeSelector: map[string]string{"a": "b"}, Tolerations: tol, SecurityContext: sc}})))
	assert.Equal(t,
		pods(RenderTrainingJob(TrainingJob{Name: "j", Namespace: "n", Env: map[string]string{"A": "1"}, SecurityContext: sc, FileServer: &FileServer{SecurityContext: sc}})),
		pods(RenderTrainingJob(TrainingJob{Name: "j", Namespace: "n", Pod: &PodSettings{Env: map[string]string{"A": "1"}, SecurityContext: sc}, FileServer: &FileServer{Pod: &PodSettings{SecurityContext: sc}}})))
}

func TestPod_Validate(t *testing.T) {
	withPod := func(f func(p *PodSettings)) *PodSettings {
		p := &PodSettings{}
		f(p)
		return p
	}
	vol := func(name string) Volume { return Volume{Name: name, EmptyDir: &EmptyDirSource{}} }
	conf := `[{"dict_name":"d","shard":1}]`
	for want, check := range map[string]FieldErrors{
		// ctr's own volumes, mount paths, labels and annotations.
		"pod.volumes[0].name": TrainingJob{Name: "j", Namespace: "n", Pod: withPod(func(p *PodSettings) { p.Volumes = []Volume{vol("model-output")} })}.Validate(),
		"file_server.pod.volume_mounts[0].mount_path": TrainingJob{Name: "j", Namespace: "n", FileServer: &FileServer{Pod: withPod(func(p *PodSettings) {
			p.Volumes, p.VolumeMounts = []Volume{vol("x")}, []VolumeMount{{Name: "x", MountPath: "/web/output/sub"}}
		})}}.Validate(),
		"pod.volume_mounts[0].mount_path": Cube{Name: "c", Namespace: "n", DonefileURL: testDonefile, Pod: withPod(func(p *PodSettings) {
			p.Volumes, p.VolumeMounts = []Volume{vol("x")}, []VolumeMount{{Name: "x", MountPath: "/data"}}
		})}.Validate(),
		`pod.labels["ctr.elasticctr.io/shard"]`: Cube{Name: "c", Namespace: "n", DonefileURL: testDonefile, Pod: &PodSettings{Labels: map[string]string{"ctr.elasticctr.io/shard": "1"}}}.Validate(),
		`pod.labels["paddle-job"]`:              TrainingJob{Name: "j", Namespace: "n", Pod: &PodSettings{Labels: map[string]string{"paddle-job": "x"}}}.Validate(),
		`pod.labels["bad key!"]`:                Serving{Name: "s", Namespace: "n", CubeConf: conf, Pod: &PodSettings{Labels: map[string]string{"bad key!": "x"}}}.Validate(),
		`pod.annotations["volcano.sh/x"]`:       Serving{Name: "s", Namespace: "n", CubeConf: conf, Pod: &PodSettings{Annotations: map[string]string{"volcano.sh/x": "1"}}}.Validate(),
		`pod.annotations["ctr.elasticctr.io/cube-conf-sha256"]`: Serving{Name: "s", Namespace: "n", CubeConf: conf, Pod: &PodSettings{
			Annotations: map[string]string{CubeConfChecksumAnnotation: "1"}}}.Validate(),
		// The shape on its own.
		"pod.service_account_annotations": Serving{Name: "s", Namespace: "n", CubeConf: conf, Pod: &PodSettings{ServiceAccountName: "mine",
			ServiceAccountAnnotations: map[string]string{"a": "b"}}}.Validate(),
		"pod.volumes[0]":            Serving{Name: "s", Namespace: "n", CubeConf: conf, Pod: &PodSettings{Volumes: []Volume{{Name: "x"}}}}.Validate(),
		"pod.volume_mounts[0].name": Serving{Name: "s", Namespace: "n", CubeConf: conf, Pod: &PodSettings{VolumeMounts: []VolumeMount{{Name: "nope", MountPath: "/x"}}}}.Validate(),
		"pod.env_from[0]":           Serving{Name: "s", Namespace: "n", CubeConf: conf, Pod: &PodSettings{EnvFrom: []EnvFrom{{Secret: "a", ConfigMap: "b"}}}}.Validate(),
		`pod.secret_env["A"]`:       Serving{Name: "s", Namespace: "n", CubeConf: conf, Pod: &PodSettings{Env: map[string]string{"A": "1"}, SecretEnv: map[string]KeyRef{"A": {Secret: "s", Key: "k"}}}}.Validate(),
		`pod.secret_env["A"].key`:   Serving{Name: "s", Namespace: "n", CubeConf: conf, Pod: &PodSettings{SecretEnv: map[string]KeyRef{"A": {Secret: "s", Key: "bad/key"}}}}.Validate(),
		"pod.affinity.node.required[0].match_expressions[0].values": Serving{Name: "s", Namespace: "n", CubeConf: conf, Pod: &PodSettings{Affinity: &Affinity{Node: &NodeAffinity{
			Required: []NodeSelectorTerm{{MatchExpressions: []NodeRequirement{{Key: "zone", Operator: "In"}}}}}}}}.Validate(),
		"pod.priority_class_name": Serving{Name: "s", Namespace: "n", CubeConf: conf, Pod: &PodSettings{PriorityClassName: "Not_Valid"}}.Validate(),
		// A deprecated attribute and its replacement together.
		"node_selector": Cube{Name: "c", Namespace: "n", DonefileURL: testDonefile, NodeSelector: map[string]string{"a": "b"}, Pod: &PodSettings{NodeSelector: map[string]string{"a": "b"}}}.Validate(),
		"env":           TrainingJob{Name: "j", Namespace: "n", Env: map[string]string{"A": "1"}, Pod: &PodSettings{Env: map[string]string{"B": "1"}}}.Validate(),
		"file_server.security_context": TrainingJob{Name: "j", Namespace: "n", FileServer: &FileServer{SecurityContext: &SecurityContext{},
			Pod: &PodSettings{SecurityContext: &SecurityContext{}}}}.Validate(),
	} {
		require.NotEmpty(t, check, want)
		assert.Equal(t, want, check[0].Path, "%v", check)
	}
	// Settings that collide with nothing pass.
	assert.Empty(t, TrainingJob{Name: "j", Namespace: "n", Pod: fullPod(), FileServer: &FileServer{Pod: fullPod()}}.Validate())
	assert.Empty(t, Cube{Name: "c", Namespace: "n", DonefileURL: testDonefile, Pod: fullPod()}.Validate())
	assert.Empty(t, Serving{Name: "s", Namespace: "n", CubeConf: conf, Pod: fullPod()}.Validate())
}
