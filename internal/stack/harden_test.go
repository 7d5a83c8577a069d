package stack

import (
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
)

// typed converts a rendered object back to its typed form, as the API server would read it.
func typed[T any](t *testing.T, u *unstructured.Unstructured) *T {
	t.Helper()
	require.NotNil(t, u)
	var v T
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &v))
	return &v
}

// ofKind returns the rendered objects of a kind by name, typed.
func ofKind[T any](t *testing.T, set Set, kind metav1.TypeMeta) map[string]*T {
	t.Helper()
	out := map[string]*T{}
	for _, o := range set {
		if o.Object.GetKind() == kind.Kind {
			out[o.Object.GetName()] = typed[T](t, o.Object)
		}
	}
	return out
}

// eachPodTemplate renders each of sets and calls fn with every pod template of each (see
// podTemplates); it returns how many it saw.
func eachPodTemplate(t *testing.T, sets map[string]func() (Set, error), fn func(name, key string, set Set, tpl corev1.PodTemplateSpec)) (seen int) {
	t.Helper()
	for name, render := range sets {
		set, err := render()
		require.NoError(t, err, name)
		for key, tpl := range podTemplates(t, set) {
			seen++
			fn(name, key, set, tpl)
		}
	}
	return seen
}

// podTemplates returns every pod template of a rendered set by object key (Deployments,
// StatefulSets and each task of a Volcano Job).
func podTemplates(t *testing.T, set Set) map[string]corev1.PodTemplateSpec {
	t.Helper()
	out := map[string]corev1.PodTemplateSpec{}
	for _, o := range set {
		switch o.Object.GetKind() {
		case "Deployment", "StatefulSet":
			var v struct {
				Spec struct {
					Template corev1.PodTemplateSpec `json:"template"`
				} `json:"spec"`
			}
			require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object.Object, &v))
			out[o.Key] = v.Spec.Template
		case "Job":
			job := typed[batchv1alpha1.Job](t, o.Object)
			for _, task := range job.Spec.Tasks {
				out[o.Key+"/"+task.Name] = task.Template
			}
		}
	}
	return out
}

func TestCubeTransfer_FilesOnTheirOwnPort(t *testing.T) {
	c := Cube{Name: "cube", Namespace: "ads", DonefileURL: testDonefile, TransferFilesPort: 9100}
	set, err := RenderCube(c)
	require.NoError(t, err)
	d := c.Defaulted()
	args := podTemplates(t, set)[CubeTransferKey("cube")].Spec.Containers[0].Args
	assert.Equal(t, "0.0.0.0:9100", argAfter(args, "--files-listen"))
	assert.Equal(t, "http://cube-transfer.ads.svc:9100", argAfter(args, "--public-url"))
	assert.Equal(t, "0.0.0.0:8099", argAfter(args, "--listen"))
	agent := podTemplates(t, set)["apps/v1/StatefulSet/cube-shard-0"].Spec.Containers[0].Args
	assert.Equal(t, d.TransferFilesURL()+"/files/", argAfter(agent, "--source-url"))
	svc := typed[corev1.Service](t, set.Find("v1/Service/cube-transfer"))
	var ports []int32
	for _, p := range svc.Spec.Ports {
		ports = append(ports, p.Port)
	}
	assert.ElementsMatch(t, []int32{8099, 9100}, ports)
	assert.Equal(t, "http://cube-transfer.ads.svc:8099", d.TransferURL(), "the status API stays on transfer_port")
}

// TestCubeServer_ProbesOnTheProbeListener reads the servers' ports from their own args and
// resolves the probes' ports against the container's: the probes reach the port the server
// serves them on (--probe-listen), not the clients' (--listen), so the two cannot drift.
func TestCubeServer_ProbesOnTheProbeListener(t *testing.T) {
	set, err := RenderCube(Cube{Name: "cube", Namespace: "ads", DonefileURL: testDonefile, Port: 9027})
	require.NoError(t, err)
	tpl := podTemplates(t, set)["apps/v1/StatefulSet/cube-shard-0"]
	ctr := tpl.Spec.Containers[0]
	port := func(flag string) int32 {
		_, p, err := net.SplitHostPort(argAfter(ctr.Args, flag))
		require.NoError(t, err, flag)
		n, err := strconv.ParseInt(p, 10, 32)
		require.NoError(t, err, flag)
		return int32(n)
	}
	probePort, clientPort := port("--probe-listen"), port("--listen")
	assert.Equal(t, int32(9027), clientPort)
	assert.NotEqual(t, clientPort, probePort)
	for name, pr := range map[string]*corev1.Probe{"readiness": ctr.ReadinessProbe, "liveness": ctr.LivenessProbe} {
		require.NotNil(t, pr, name)
		require.NotNil(t, pr.HTTPGet, name)
		p := pr.HTTPGet.Port
		if p.Type == intstr.String {
			assert.Equal(t, probePort, containerPort(t, tpl, p.StrVal), "%s probe", name)
		} else {
			assert.Equal(t, probePort, p.IntVal, "%s probe", name)
		}
	}
}

func argAfter(args []string, flag string) string {
	for i, a := range args {
		if a == flag && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

func TestCubeNetworkPolicies_Disabled(t *testing.T) {
	set, err := RenderCube(Cube{Name: "cube", Namespace: "ads", DonefileURL: testDonefile, NetworkPolicy: &NetworkPolicy{Enabled: ptr.To(false)}})
	require.NoError(t, err)
	for _, k := range set.Keys() {
		assert.NotContains(t, k, "NetworkPolicy")
	}
	on, err := RenderCube(Cube{Name: "cube", Namespace: "ads", DonefileURL: testDonefile, NetworkPolicy: &NetworkPolicy{Enabled: ptr.To(true)}})
	require.NoError(t, err)
	assert.Len(t, on, len(set)+2)
}

func TestCubeNetworkPolicies_AllowFrom(t *testing.T) {
	set, err := RenderCube(Cube{Name: "cube", Namespace: "ads", DonefileURL: testDonefile, NetworkPolicy: &NetworkPolicy{AllowFrom: []NetworkPeer{
		{NamespaceLabels: map[string]string{"team": "monitoring"}}}}})
	require.NoError(t, err)
	srv := typed[networkingv1.NetworkPolicy](t, set.Find("networking.k8s.io/v1/NetworkPolicy/cube-server"))
	last := srv.Spec.Ingress[0].From[len(srv.Spec.Ingress[0].From)-1]
	assert.Nil(t, last.PodSelector, "a namespace peer admits every pod of its namespaces")
	assert.Equal(t, map[string]string{"team": "monitoring"}, last.NamespaceSelector.MatchLabels)
}

// TestHardenedPods_EveryPodTemplate walks every pod template the three workload resources
// render and checks the hardened defaults, and the image-specific ones.
func TestHardenedPods_EveryPodTemplate(t *testing.T) {
	conf := Cube{Name: "cube", Namespace: "ads", DonefileURL: testDonefile}.Defaulted().CubeConf()
	sets := map[string]func() (Set, error){
		"cube": func() (Set, error) {
			return RenderCube(Cube{Name: "cube", Namespace: "ads", DonefileURL: testDonefile, Image: CubeImage("v1.2.3"), Storage: &CubeStorage{}})
		},
		"serving": func() (Set, error) { return RenderServing(Serving{Name: "s", Namespace: "ads", CubeConf: conf}) },
		"training": func() (Set, error) {
			return RenderTrainingJob(TrainingJob{Name: "t", Namespace: "ads", ProviderVersion: "v1.2.3"})
		},
		"collective": func() (Set, error) {
			return RenderTrainingJob(TrainingJob{Name: "t", Namespace: "ads", Mode: ModeCollective, ProviderVersion: "v1.2.3"})
		},
	}
	seen := eachPodTemplate(t, sets, func(_, key string, set Set, tpl corev1.PodTemplateSpec) {
		ps := tpl.Spec.SecurityContext
		require.NotNil(t, ps, key)
		require.NotNil(t, ps.SeccompProfile, key)
		assert.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, ps.SeccompProfile.Type, key)
		for _, c := range tpl.Spec.Containers {
			require.NotNil(t, c.SecurityContext, key)
			assert.Equal(t, ptr.To(false), c.SecurityContext.AllowPrivilegeEscalation, key)
			assert.Equal(t, []corev1.Capability{"ALL"}, c.SecurityContext.Capabilities.Drop, key)
			ours := strings.HasPrefix(c.Image, CubeImageRepository+":")
			assert.Equal(t, ours, ptr.Deref(c.SecurityContext.ReadOnlyRootFilesystem, false), "%s: read-only root only for this repository's image", key)
			assert.Equal(t, ours, ptr.Deref(ps.RunAsNonRoot, false), "%s: non-root only for this repository's image (Paddle's run as root)", key)
		}
		for _, c := range tpl.Spec.InitContainers {
			require.NotNil(t, c.SecurityContext, key)
			assert.Equal(t, ptr.To(false), c.SecurityContext.AllowPrivilegeEscalation, key)
			assert.Equal(t, []corev1.Capability{"ALL"}, c.SecurityContext.Capabilities.Drop, key)
			assert.Equal(t, ptr.To(true), c.SecurityContext.ReadOnlyRootFilesystem, "%s: init container %s", key, c.Name)
			assert.Equal(t, ptr.To(true), c.SecurityContext.RunAsNonRoot, "%s: init container %s runs the cube image as its user", key, c.Name)
		}
		writesVolume := false
		for _, c := range append(tpl.Spec.InitContainers, tpl.Spec.Containers...) {
			for _, m := range c.VolumeMounts {
				if !m.ReadOnly && m.Name != "slot-conf" {
					writesVolume = true
				}
			}
		}
		claims := false
		if o := set.Find(key); o != nil {
			_, claims = o.Object["spec"].(map[string]any)["volumeClaimTemplates"]
		}
		if writesVolume || claims {
			assert.Equal(t, ptr.To[int64](cubeUID), ps.FSGroup, "%s writes a volume: its group is the one every writer shares", key)
		}
	})
	// cube: 2 shards + transfer; serving; ps: pserver, trainer, file server; collective: worker, file server.
	assert.Equal(t, 3+1+3+2, seen, "every pod template was checked")
}

func TestHardenedPods_SecurityContextOverrides(t *testing.T) {
	o := &SecurityContext{RunAsUser: ptr.To[int64](0), RunAsNonRoot: ptr.To(false), FSGroup: ptr.To[int64](2000), ReadOnlyRootFilesystem: ptr.To(false),
		AllowPrivilegeEscalation: ptr.To(true), SeccompProfile: "Unconfined", AddCapabilities: []string{"NET_ADMIN"}}
	set, err := RenderCube(Cube{Name: "cube", Namespace: "ads", DonefileURL: testDonefile, SecurityContext: o})
	require.NoError(t, err)
	for key, tpl := range podTemplates(t, set) {
		ps, cs := tpl.Spec.SecurityContext, tpl.Spec.Containers[0].SecurityContext
		assert.Equal(t, int64(0), *ps.RunAsUser, key)
		assert.False(t, *ps.RunAsNonRoot, key)
		assert.Equal(t, int64(2000), *ps.FSGroup, key)
		assert.Equal(t, int64(cubeUID), *ps.RunAsGroup, "%s: what is not overridden keeps its default", key)
		assert.Equal(t, corev1.SeccompProfileTypeUnconfined, ps.SeccompProfile.Type, key)
		assert.False(t, *cs.ReadOnlyRootFilesystem, key)
		assert.True(t, *cs.AllowPrivilegeEscalation, key)
		assert.Equal(t, []corev1.Capability{"NET_ADMIN"}, cs.Capabilities.Add, key)
		assert.Equal(t, []corev1.Capability{"ALL"}, cs.Capabilities.Drop, key)
	}
}

func TestCubeServers_MemoryLimit(t *testing.T) {
	limits := func(req, lim map[string]string) corev1.ResourceRequirements {
		set, err := RenderCube(Cube{Name: "cube", Namespace: "ads", DonefileURL: testDonefile, Requests: req, Limits: lim})
		require.NoError(t, err)
		return podTemplates(t, set)["apps/v1/StatefulSet/cube-shard-0"].Spec.Containers[0].Resources
	}
	r := limits(nil, nil)
	assert.Equal(t, DefaultCubeMemory, r.Limits.Memory().String())
	assert.Equal(t, DefaultCubeMemory, r.Requests.Memory().String())
	r = limits(map[string]string{"memory": "6Gi", "cpu": "2"}, nil)
	assert.Equal(t, "6Gi", r.Limits.Memory().String(), "a memory request alone is also the limit")
	assert.Equal(t, "2", r.Limits.Cpu().String(), "the default CPU limit, never below the request")
	r = limits(map[string]string{"memory": "2Gi"}, map[string]string{"memory": "8Gi"})
	assert.Equal(t, "2Gi", r.Requests.Memory().String())
	assert.Equal(t, "8Gi", r.Limits.Memory().String())
	r = limits(map[string]string{"cpu": "1"}, nil)
	assert.Equal(t, DefaultCubeMemory, r.Limits.Memory().String())
}

func TestTrainingFileServer_UploadToken(t *testing.T) {
	render := func(fs *FileServer, token string) Set {
		set, err := RenderTrainingJob(TrainingJob{Name: "t", Namespace: "ads", FileServer: fs, UploadToken: token})
		require.NoError(t, err)
		return set
	}
	set := render(&FileServer{Upload: true}, "s3cr3t-upload")
	secret := set.Find("v1/Secret/t-upload")
	require.NotNil(t, secret)
	assert.Equal(t, "s3cr3t-upload", UploadToken(secret))
	pods := podTemplates(t, set)
	fsPod := pods["apps/v1/Deployment/t-fileserver"]
	args := fsPod.Spec.Containers[0].Args
	assert.NotContains(t, args, "--upload-insecure")
	tokenFile := argAfter(args, "--upload-token-file")
	var mounted bool
	for _, m := range fsPod.Spec.Containers[0].VolumeMounts {
		if strings.HasPrefix(tokenFile, m.MountPath+"/") {
			for _, v := range fsPod.Spec.Volumes {
				if v.Name == m.Name && v.Secret != nil && v.Secret.SecretName == secret.GetName() {
					mounted = true
				}
			}
		}
		if m.Name == "model-output" {
			assert.False(t, m.ReadOnly, "uploads write the model output")
		}
	}
	assert.True(t, mounted, "the token file %s comes from the Secret", tokenFile)
	envRef := func(task string) *corev1.SecretKeySelector {
		for _, e := range pods[VolcanoJobKey("t")+"/"+task].Spec.Containers[0].Env {
			if e.Name == UploadTokenEnv {
				require.Empty(t, e.Value, "never a literal token")
				require.NotNil(t, e.ValueFrom)
				return e.ValueFrom.SecretKeyRef
			}
		}
		return nil
	}
	ref := envRef("trainer")
	require.NotNil(t, ref, "trainers get the upload token")
	assert.Equal(t, secret.GetName(), ref.Name)
	assert.Equal(t, "s3cr3t-upload", SecretValue(secret, ref.Key))
	assert.Nil(t, envRef("pserver"))
	m, err := set.Manifests()
	require.NoError(t, err)
	for k, y := range m {
		assert.NotContains(t, y, "s3cr3t-upload", k)
		assert.NotContains(t, y, "czNjcjN0LXVwbG9hZA", k)
	}
	planned, err := RenderTrainingJob(TrainingJob{Name: "t", Namespace: "ads", FileServer: &FileServer{Upload: true}})
	require.NoError(t, err)
	pm, err := planned.Manifests()
	require.NoError(t, err)
	assert.Equal(t, m, pm, "the plan, before a token exists, shows the same objects")

	open := render(&FileServer{Upload: true, UploadInsecure: true}, "")
	assert.Nil(t, open.Find("v1/Secret/t-upload"))
	assert.Contains(t, podTemplates(t, open)["apps/v1/Deployment/t-fileserver"].Spec.Containers[0].Args, "--upload-insecure")

	readOnly := render(nil, "")
	assert.Nil(t, readOnly.Find("v1/Secret/t-upload"))
	fsPod = podTemplates(t, readOnly)["apps/v1/Deployment/t-fileserver"]
	assert.NotContains(t, fsPod.Spec.Containers[0].Args, "--upload")
	assert.True(t, fsPod.Spec.Containers[0].VolumeMounts[0].ReadOnly)
}

func TestTrainingFileServer_ImageAtProviderVersion(t *testing.T) {
	image := func(version string) string {
		set, err := RenderTrainingJob(TrainingJob{Name: "t", Namespace: "ads", ProviderVersion: version})
		require.NoError(t, err)
		return podTemplates(t, set)["apps/v1/Deployment/t-fileserver"].Spec.Containers[0].Image
	}
	assert.Equal(t, CubeImageRepository+":v1.2.3", image("v1.2.3"))
	assert.Equal(t, CubeImage("v1.2.3"), image("v1.2.3"))
	assert.Equal(t, CubeImageRepository+":26a9a1d5fee3-dirty", image("26a9a1d5fee3-dirty"), "a development build's image is its commit's")
	assert.Empty(t, image("dev"), "a provider without a version has no default image (the provider refuses the plan)")
}

func TestHardening_Validate(t *testing.T) {
	okCube := Cube{Name: "c", Namespace: "n", DonefileURL: testDonefile}
	for path, mut := range map[string]func(*Cube){
		"transfer_files_port": func(c *Cube) { c.TransferFilesPort = DefaultTransferPort },
		"port":                func(c *Cube) { c.Port = CubeProbePort },
		"security_context.run_as_non_root": func(c *Cube) {
			c.SecurityContext = &SecurityContext{RunAsUser: ptr.To[int64](0), RunAsNonRoot: ptr.To(true)}
		},
		"security_context.add_capabilities[0]": func(c *Cube) { c.SecurityContext = &SecurityContext{AddCapabilities: []string{"CAP_NET_ADMIN"}} },
		"network_policy.allow_from": func(c *Cube) {
			c.NetworkPolicy = &NetworkPolicy{Enabled: ptr.To(false), AllowFrom: []NetworkPeer{{PodLabels: map[string]string{"a": "b"}}}}
		},
		"network_policy.allow_from[0]": func(c *Cube) {
			c.NetworkPolicy = &NetworkPolicy{AllowFrom: []NetworkPeer{{PodLabels: map[string]string{}}}}
		},
		`network_policy.allow_from[0].pod_labels["a"]`: func(c *Cube) {
			c.NetworkPolicy = &NetworkPolicy{AllowFrom: []NetworkPeer{{PodLabels: map[string]string{"a": "not a value"}}}}
		},
	} {
		c := okCube
		mut(&c)
		errs := c.Validate()
		require.NotEmpty(t, errs, path)
		assert.Equal(t, path, errs[0].Path)
	}
	j := TrainingJob{Name: "t", Namespace: "n", FileServer: &FileServer{UploadInsecure: true}}
	require.NotEmpty(t, j.Validate())
	assert.Equal(t, "file_server.upload_insecure", j.Validate()[0].Path)
	j = TrainingJob{Name: "t", Namespace: "n", FileServer: &FileServer{SecurityContext: &SecurityContext{AddCapabilities: []string{"all"}}}}
	assert.Equal(t, "file_server.security_context.add_capabilities[0]", j.Validate()[0].Path)
}

// TestServing_CubeConfNamingTwoCubesOfOneName: the pods' label tells cubes apart by name,
// so a cube_conf naming two cubes called alike in two namespaces is refused at plan.
func TestServing_CubeConfNamingTwoCubesOfOneName(t *testing.T) {
	a := Cube{Name: "cube", Namespace: "ads", DonefileURL: testDonefile}.Defaulted().CubeConf()
	b := Cube{Name: "cube", Namespace: "team-b", Dict: "other", DonefileURL: testDonefile}.Defaulted().CubeConf()
	conf := strings.TrimSuffix(strings.TrimSpace(a), "]") + "," + strings.TrimPrefix(strings.TrimSpace(b), "[")
	errs := Serving{Name: "s", Namespace: "ads", CubeConf: conf}.Validate()
	require.Len(t, errs, 1, "%v", errs)
	assert.Contains(t, errs.Error(), `names two cubes called "cube"`)
}

// containerPort is the number of the first container's port called name.
func containerPort(t *testing.T, tpl corev1.PodTemplateSpec, name string) int32 {
	t.Helper()
	for _, p := range tpl.Spec.Containers[0].Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	t.Fatalf("no container port %q", name)
	return 0
}
