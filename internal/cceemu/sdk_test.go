package cceemu_test

// These tests drive the emulator with the real bce-sdk-go client, proving it answers what the SDK sends.
// The SDK's NewClient initialises a package-global http.Client and is not safe for concurrent use, so none
// of these tests calls t.Parallel.

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/baidubce/bce-sdk-go/auth"
	"github.com/baidubce/bce-sdk-go/bce"
	ccev2 "github.com/baidubce/bce-sdk-go/services/cce/v2"
	"github.com/baidubce/bce-sdk-go/services/cce/v2/types"

	"github.com/elasticctr/terraform-provider-ctr/internal/cceemu"
)

const (
	testAK      = "AKtest"
	testSK      = "SKtest"
	testKubecfg = "apiVersion: v1\nkind: Config\n# cceemu test\n"
	phaseDelay  = 20 * time.Millisecond
)

func startEmu(t *testing.T, mutate ...func(*cceemu.Options)) (*cceemu.Server, string) {
	t.Helper()
	opts := cceemu.Options{
		Credentials: map[string]string{testAK: testSK},
		Kubeconfig:  testKubecfg,
		PhaseDelay:  phaseDelay,
		Log:         testLog{t},
	}
	for _, m := range mutate {
		m(&opts)
	}
	s := cceemu.New(opts)
	ep, err := s.Start()
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(s.Close)
	return s, ep
}

type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func newClient(t *testing.T, ep, ak, sk string) *ccev2.Client {
	t.Helper()
	c, err := ccev2.NewClient(ak, sk, ep)
	if err != nil {
		t.Fatalf("new client: %v", err)
	}
	return c
}

func clusterArgs(name, version string) *ccev2.CreateClusterArgs {
	return &ccev2.CreateClusterArgs{CreateClusterRequest: &ccev2.CreateClusterRequest{
		ClusterSpec: &types.ClusterSpec{
			ClusterName: name,
			ClusterType: types.ClusterTypeNormal,
			K8SVersion:  types.K8SVersion(version),
			RuntimeType: types.RuntimeTypeContainerd,
			VPCID:       "vpc-test",
			MasterConfig: types.MasterConfig{
				MasterType:                 types.MasterTypeManagedPro,
				ManagedClusterMasterOption: types.ManagedClusterMasterOption{MasterVPCSubnetZone: types.AvailableZoneA},
			},
			ContainerNetworkConfig: types.ContainerNetworkConfig{
				Mode:                 types.ContainerNetworkModeVPCRouteVeth,
				ClusterPodCIDR:       "172.16.0.0/16",
				ClusterIPServiceCIDR: "172.31.0.0/16",
			},
		},
	}}
}

// serviceError asserts err is the SDK's service error with the given status and code.
func serviceError(t *testing.T, err error, status int, code string) *bce.BceServiceError {
	t.Helper()
	var se *bce.BceServiceError
	if !errors.As(err, &se) {
		t.Fatalf("error %v (%T), want *bce.BceServiceError %d %s", err, err, status, code)
	}
	if se.StatusCode != status || se.Code != code {
		t.Fatalf("got %d %s (%s), want %d %s", se.StatusCode, se.Code, se.Message, status, code)
	}
	return se
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(phaseDelay / 4)
	}
}

func createRunningCluster(t *testing.T, c *ccev2.Client) string {
	t.Helper()
	id := createCluster(t, c, "demo")
	waitFor(t, "running", func() bool {
		got, err := c.GetCluster(id)
		return err == nil && got.Cluster.Status.ClusterPhase == types.ClusterPhaseRunning
	})
	return id
}

// createCluster asks for a cluster of Kubernetes 1.34.2 named name and returns its ID.
func createCluster(t *testing.T, c *ccev2.Client, name string) string {
	t.Helper()
	res, err := c.CreateCluster(clusterArgs(name, "1.34.2"))
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	return res.ClusterID
}

func TestSDK_ClusterCreateWalksPhasesToRunningThenKubeconfig(t *testing.T) {
	_, ep := startEmu(t)
	c := newClient(t, ep, testAK, testSK)

	res, err := c.CreateCluster(clusterArgs("demo", "1.34.2"))
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if !strings.HasPrefix(res.ClusterID, "cce-") || len(res.ClusterID) != 12 || res.RequestID == "" {
		t.Fatalf("create response %+v", res)
	}
	_, err = c.GetKubeConfig(&ccev2.GetKubeConfigArgs{ClusterID: res.ClusterID, KubeConfigType: ccev2.KubeConfigTypeVPC})
	serviceError(t, err, http.StatusConflict, cceemu.CodeClusterNotRunning)

	var seen []types.ClusterPhase
	waitFor(t, "running", func() bool {
		got, err := c.GetCluster(res.ClusterID)
		if err != nil {
			t.Fatalf("get: %v", err)
		}
		if p := got.Cluster.Status.ClusterPhase; len(seen) == 0 || seen[len(seen)-1] != p {
			seen = append(seen, p)
		}
		return got.Cluster.Status.ClusterPhase == types.ClusterPhaseRunning
	})
	want := []types.ClusterPhase{"pending", "provisioning", "provisioned", "running"}
	if strings.Join(phaseStrings(seen), ",") != strings.Join(phaseStrings(want), ",") {
		t.Fatalf("phases %v, want %v", seen, want)
	}

	got, err := c.GetCluster(res.ClusterID)
	if err != nil {
		t.Fatal(err)
	}
	spec := got.Cluster.Spec
	if spec.ClusterID != res.ClusterID || spec.ClusterName != "demo" || spec.K8SVersion != "1.34.2" ||
		spec.MasterConfig.MasterType != types.MasterTypeManagedPro || spec.ContainerNetworkConfig.ClusterPodCIDR != "172.16.0.0/16" {
		t.Fatalf("spec not echoed: %+v", spec)
	}
	if got.Cluster.CreatedAt.IsZero() || !got.Cluster.Status.InfrastructureReady {
		t.Fatalf("status %+v createdAt %v", got.Cluster.Status, got.Cluster.CreatedAt)
	}

	kc, err := c.GetKubeConfig(&ccev2.GetKubeConfigArgs{ClusterID: res.ClusterID, KubeConfigType: ccev2.KubeConfigTypeVPC})
	if err != nil {
		t.Fatalf("kubeconfig: %v", err)
	}
	if kc.KubeConfig != testKubecfg || kc.KubeConfigType != ccev2.KubeConfigTypeVPC {
		t.Fatalf("kubeconfig %+v", kc)
	}
	_, err = c.GetKubeConfig(&ccev2.GetKubeConfigArgs{ClusterID: res.ClusterID, KubeConfigType: ccev2.KubeConfigTypePublic})
	serviceError(t, err, http.StatusBadRequest, cceemu.CodeInvalidParam) // not exposedPublic

	ev, err := c.GetClusterEventSteps(res.ClusterID)
	if err != nil || ev.Status != ccev2.EventStatusCreated || len(ev.Steps) == 0 {
		t.Fatalf("events %+v %v", ev, err)
	}

	list, err := c.ListClusters(&ccev2.ListClustersArgs{PageNum: 1, PageSize: 10})
	if err != nil || list.ClusterPage.TotalCount != 1 || list.ClusterPage.ClusterList[0].Spec.ClusterID != res.ClusterID {
		t.Fatalf("list %+v %v", list, err)
	}
}

func phaseStrings(ps []types.ClusterPhase) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = string(p)
	}
	return out
}

func TestSDK_InstanceGroupScalesAndNeverEchoesPassword(t *testing.T) {
	s, ep := startEmu(t)
	c := newClient(t, ep, testAK, testSK)
	cid := createRunningCluster(t, c)

	const password = "Sup3r-secret!"
	spec := types.InstanceGroupSpec{
		InstanceGroupName: "workers",
		ClusterRole:       types.ClusterRoleNode,
		Replicas:          2,
		InstanceTemplate: types.InstanceTemplate{InstanceSpec: types.InstanceSpec{ //nolint:staticcheck // what the SDK and CCE still send for a single template
			MachineType:      types.MachineTypeBCC,
			InstanceType:     "N5",
			InstanceResource: types.InstanceResource{MachineSpec: "bcc.g5.c4m16", RootDiskSize: 100},
			ImageID:          "m-test",
			AdminPassword:    password,
			Labels:           types.InstanceLabels{"pool": "workers"},
		}},
	}
	created, err := c.CreateInstanceGroup(&ccev2.CreateInstanceGroupArgs{ClusterID: cid,
		Request: &ccev2.CreateInstanceGroupRequest{InstanceGroupSpec: spec}})
	if err != nil {
		t.Fatalf("create group: %v", err)
	}
	gid := created.InstanceGroupID
	get := func() *ccev2.InstanceGroup {
		t.Helper()
		g, err := c.GetInstanceGroup(&ccev2.GetInstanceGroupArgs{ClusterID: cid, InstanceGroupID: gid})
		if err != nil {
			t.Fatalf("get group: %v", err)
		}
		return g.InstanceGroup
	}
	g := get()
	if g.Spec.InstanceTemplate.AdminPassword != "" {
		t.Fatal("GET echoed adminPassword")
	}
	if g.Spec.CCEInstanceGroupID != gid || g.Spec.InstanceTemplate.InstanceResource.MachineSpec != "bcc.g5.c4m16" ||
		g.Spec.InstanceTemplate.Labels["pool"] != "workers" || g.Spec.Replicas != 2 {
		t.Fatalf("spec not echoed: %+v", g.Spec)
	}
	if posts := s.Requests(http.MethodPost, "/cluster/"+cid+"/instancegroup"); len(posts) != 1 || !strings.Contains(posts[0].Body, password) {
		t.Fatalf("the raw create body was not recorded: %+v", posts)
	}
	for _, r := range s.Requests(http.MethodGet, "") {
		if strings.Contains(r.Body, password) {
			t.Fatalf("a GET carried the password: %+v", r)
		}
	}

	waitFor(t, "2 ready", func() bool { return get().Status.ReadyReplicas == 2 })
	if got, _ := c.GetCluster(cid); got.Cluster.Status.NodeNum != 2 {
		t.Fatalf("nodeNum %d, want 2", got.Cluster.Status.NodeNum)
	}

	scale := func(n int) {
		t.Helper()
		_, err := c.UpdateInstanceGroupReplicas(&ccev2.UpdateInstanceGroupReplicasArgs{ClusterID: cid, InstanceGroupID: gid,
			Request: &ccev2.UpdateInstanceGroupReplicasRequest{Replicas: n, DeleteInstance: true,
				DeleteOption: &types.DeleteOption{DeleteResource: true}}})
		if err != nil {
			t.Fatalf("scale to %d: %v", n, err)
		}
	}
	scale(3)
	if g := get(); g.Spec.Replicas != 3 || g.Status.ReadyReplicas != 2 {
		t.Fatalf("right after scale-up: replicas %d ready %d", g.Spec.Replicas, g.Status.ReadyReplicas)
	}
	waitFor(t, "3 ready", func() bool { return get().Status.ReadyReplicas == 3 })
	scale(1)
	if g := get(); g.Status.ReadyReplicas != 1 {
		t.Fatalf("scale-down left %d ready", g.Status.ReadyReplicas)
	}

	list, err := c.ListInstanceGroups(&ccev2.ListInstanceGroupsArgs{ClusterID: cid, ListOption: &ccev2.InstanceGroupListOption{PageNo: 1, PageSize: 10}})
	if err != nil || list.Page.TotalCount != 1 || list.Page.List[0].Spec.CCEInstanceGroupID != gid {
		t.Fatalf("list %+v %v", list, err)
	}

	if err := s.SetReplicasOutOfBand(cid, gid, 4); err != nil {
		t.Fatal(err)
	}
	if g := get(); g.Spec.Replicas != 4 {
		t.Fatalf("drift not visible: replicas %d", g.Spec.Replicas)
	}

	if _, err := c.DeleteInstanceGroup(&ccev2.DeleteInstanceGroupArgs{ClusterID: cid, InstanceGroupID: gid, DeleteInstances: true}); err != nil {
		t.Fatalf("delete group: %v", err)
	}
	_, err = c.GetInstanceGroup(&ccev2.GetInstanceGroupArgs{ClusterID: cid, InstanceGroupID: gid})
	serviceError(t, err, http.StatusNotFound, cceemu.CodeInstanceGroupNotFound)
}

func TestSDK_DeleteEndsInClusterNotFound(t *testing.T) {
	s, ep := startEmu(t)
	c := newClient(t, ep, testAK, testSK)
	cid := createRunningCluster(t, c)

	if _, err := c.DeleteCluster(&ccev2.DeleteClusterArgs{ClusterID: cid, DeleteResource: true, DeleteCDSSnapshot: true}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if got, err := c.GetCluster(cid); err != nil || got.Cluster.Status.ClusterPhase != types.ClusterPhaseDeleting {
		t.Fatalf("right after delete: %+v %v", got, err)
	}
	q := s.Clusters()[0].DeleteQuery
	for _, p := range []string{"deleteResource=true", "deleteCDSSnapshot=true", "batchRefundResource=false", "moveOut=false"} {
		if !strings.Contains(q, p) {
			t.Errorf("delete query %q lacks %s", q, p)
		}
	}
	var err error
	waitFor(t, "gone", func() bool { _, err = c.GetCluster(cid); return err != nil })
	serviceError(t, err, http.StatusNotFound, cceemu.CodeClusterNotFound)
	_, err = c.DeleteCluster(&ccev2.DeleteClusterArgs{ClusterID: cid})
	serviceError(t, err, http.StatusNotFound, cceemu.CodeClusterNotFound)
}

func TestSDK_DeleteOutOfBand(t *testing.T) {
	s, ep := startEmu(t)
	c := newClient(t, ep, testAK, testSK)
	id := createCluster(t, c, "demo")
	if err := s.DeleteClusterOutOfBand(id); err != nil {
		t.Fatal(err)
	}
	_, err := c.GetCluster(id)
	serviceError(t, err, http.StatusNotFound, cceemu.CodeClusterNotFound)
	if err := s.DeleteClusterOutOfBand(id); err == nil {
		t.Fatal("deleting a missing cluster out of band succeeded")
	}
}

func TestSDK_WrongCredentialsAreRejected(t *testing.T) {
	s, ep := startEmu(t)
	_, err := newClient(t, ep, testAK, "not-the-secret").GetCluster("cce-whatever")
	serviceError(t, err, http.StatusBadRequest, cceemu.CodeSignatureDoesNotMatch)
	_, err = newClient(t, ep, "AKunknown", testSK).GetCluster("cce-whatever")
	serviceError(t, err, http.StatusForbidden, cceemu.CodeInvalidAccessKeyID)
	if n := len(s.Requests("", "")); n != 2 {
		t.Fatalf("%d requests recorded, want 2 (auth failures are not retried)", n)
	}
}

func TestSDK_STSCredentials(t *testing.T) {
	const stsAK, stsSK, token = "STSak", "STSsk", "session-token-1"
	_, ep := startEmu(t, func(o *cceemu.Options) {
		o.Credentials[stsAK] = stsSK
		o.STSTokens = map[string]string{stsAK: token}
	})
	withToken := func(tok string) *ccev2.Client {
		c := newClient(t, ep, stsAK, stsSK)
		cred, err := auth.NewSessionBceCredentials(stsAK, stsSK, tok)
		if err != nil {
			t.Fatal(err)
		}
		c.Config.Credentials = cred
		return c
	}
	if _, err := withToken(token).CreateCluster(clusterArgs("sts", "1.34.2")); err != nil {
		t.Fatalf("STS create: %v", err)
	}
	_, err := withToken("someone-elses").GetCluster("cce-x")
	serviceError(t, err, http.StatusForbidden, cceemu.CodeInvalidSessionToken)
	_, err = newClient(t, ep, stsAK, stsSK).GetCluster("cce-x")
	serviceError(t, err, http.StatusForbidden, cceemu.CodeInvalidSessionToken)
}

func TestSDK_FailNextCreateEndsInCreateFailedWithReasons(t *testing.T) {
	s, ep := startEmu(t)
	c := newClient(t, ep, testAK, testSK)
	s.FailNextCreate("CreateMasterBLB", "BLB.QuotaExceeded", "BLB quota exceeded in zoneA", "Raise the BLB quota or pick another zone")
	res, err := c.CreateCluster(clusterArgs("doomed", "1.34.2"))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "create_failed", func() bool {
		got, err := c.GetCluster(res.ClusterID)
		return err == nil && got.Cluster.Status.ClusterPhase == types.ClusterPhaseCreateFailed
	})
	ev, err := c.GetClusterEventSteps(res.ClusterID)
	if err != nil {
		t.Fatal(err)
	}
	last := ev.Steps[len(ev.Steps)-1]
	if ev.Status != ccev2.EventStatusCreateFailed || last.StepName != "CreateMasterBLB" || last.ErrorInfo.Code != "BLB.QuotaExceeded" ||
		last.ErrorInfo.Message != "BLB quota exceeded in zoneA" || last.ErrorInfo.Suggestion != "Raise the BLB quota or pick another zone" ||
		last.ErrorInfo.TraceID != res.RequestID {
		t.Fatalf("events %+v last %+v", ev, last)
	}
	// Only the next create fails.
	cid := createRunningCluster(t, c)
	if cid == res.ClusterID {
		t.Fatal("same ID twice")
	}
}

func TestSDK_ServerErrorsAreRetriedByTheSDK(t *testing.T) {
	s, ep := startEmu(t)
	c := newClient(t, ep, testAK, testSK)
	id := createCluster(t, c, "demo")
	s.FailRequests(http.MethodGet, "/cluster/", http.StatusInternalServerError, cceemu.CodeInternalError, 3)
	if _, err := c.GetCluster(id); err != nil {
		t.Fatalf("3 failures then success should succeed after SDK retries: %v", err)
	}
	if n := len(s.Requests(http.MethodGet, "/cluster/"+id)); n != 4 {
		t.Fatalf("%d GETs, want 4 (1 + 3 retries)", n)
	}

	s.FailRequests(http.MethodGet, "/cluster/", http.StatusServiceUnavailable, "ServiceUnavailable", 4)
	_, err := c.GetCluster(id)
	serviceError(t, err, http.StatusServiceUnavailable, "ServiceUnavailable")

	// POST bodies are replayed on retry, and the replay must still verify (same signature, same MD5).
	s.FailRequests(http.MethodPost, "/cluster", http.StatusBadGateway, "BadGateway", 2)
	if _, err := c.CreateCluster(clusterArgs("retried", "1.34.2")); err != nil {
		t.Fatalf("create after 2 x 502: %v", err)
	}

	s.ResetRequests()
	s.FailRequests("", "/clusters", http.StatusTooManyRequests, cceemu.CodeThrottling, 1)
	_, err = c.ListClusters(&ccev2.ListClustersArgs{PageNum: 1, PageSize: 10})
	serviceError(t, err, http.StatusTooManyRequests, cceemu.CodeThrottling)
	if n := s.RouteCounts()["GET /clusters"]; n != 0 {
		t.Fatalf("a throttled request reached the route (%d)", n)
	}
	if n := len(s.Requests(http.MethodGet, "/clusters")); n != 1 {
		t.Fatalf("%d list requests, want 1: the SDK does not retry 429", n)
	}
}

func TestSDK_UnsupportedVersionIsRejectedByName(t *testing.T) {
	s, ep := startEmu(t, func(o *cceemu.Options) { o.K8sVersions = []string{"1.34.2"} })
	c := newClient(t, ep, testAK, testSK)
	_, err := c.CreateCluster(clusterArgs("old", "1.31.1"))
	se := serviceError(t, err, http.StatusBadRequest, cceemu.CodeInvalidParam)
	if !strings.Contains(se.Message, "1.31.1") {
		t.Fatalf("message %q does not name the version", se.Message)
	}
	if len(s.Clusters()) != 0 {
		t.Fatal("a rejected create made a cluster")
	}
	args := clusterArgs("", "1.34.2")
	_, err = c.CreateCluster(args)
	serviceError(t, err, http.StatusBadRequest, cceemu.CodeInvalidParam)
	args = clusterArgs("custom", "1.34.2")
	args.CreateClusterRequest.ClusterSpec.MasterConfig.MasterType = types.MasterTypeCustom
	_, err = c.CreateCluster(args)
	serviceError(t, err, http.StatusBadRequest, cceemu.CodeInvalidParam) // custom needs masters
}

// TestSDK_ConfigureInstanceGroup: the configure call replaces the group's template (labels,
// taints, disks), refuses a replica count other than the group's (the replicas API changes it)
// and a password without passwordNeedUpdate, and never stores a password.
func TestSDK_ConfigureInstanceGroup(t *testing.T) {
	s, ep := startEmu(t)
	c := newClient(t, ep, testAK, testSK)
	cid := createRunningCluster(t, c)
	spec := types.InstanceGroupSpec{
		InstanceGroupName: "workers",
		ClusterRole:       types.ClusterRoleNode,
		Replicas:          1,
		InstanceTemplate: types.InstanceTemplate{InstanceSpec: types.InstanceSpec{ //nolint:staticcheck // what the SDK and CCE still send for a single template
			InstanceResource: types.InstanceResource{MachineSpec: "bcc.g5.c4m16", RootDiskSize: 100},
			Labels:           types.InstanceLabels{"pool": "workers"},
		}},
	}
	created, err := c.CreateInstanceGroup(&ccev2.CreateInstanceGroupArgs{ClusterID: cid, Request: &ccev2.CreateInstanceGroupRequest{InstanceGroupSpec: spec}})
	if err != nil {
		t.Fatalf("create group: %v", err)
	}
	gid := created.InstanceGroupID
	spec.ClusterID, spec.CCEInstanceGroupID = cid, gid
	configure := func(sp types.InstanceGroupSpec, passwordNeedUpdate bool) error {
		_, err := c.UpdateInstanceGroupConfigure(&ccev2.UpdateInstanceGroupConfigure{PasswordNeedUpdate: passwordNeedUpdate, SyncMeta: true, InstanceGroupSpec: sp})
		return err
	}

	changed := spec
	changed.InstanceTemplate.Labels = types.InstanceLabels{"pool": "gpu"}                                //nolint:staticcheck // as above
	changed.InstanceTemplate.Taints = types.InstanceTaints{{Key: "k", Value: "v", Effect: "NoSchedule"}} //nolint:staticcheck // as above
	changed.InstanceTemplate.InstanceResource.RootDiskSize = 200                                         //nolint:staticcheck // as above
	if err := configure(changed, false); err != nil {
		t.Fatalf("configure: %v", err)
	}
	g, err := c.GetInstanceGroup(&ccev2.GetInstanceGroupArgs{ClusterID: cid, InstanceGroupID: gid})
	if err != nil {
		t.Fatal(err)
	}
	tmpl := g.InstanceGroup.Spec.InstanceTemplate //nolint:staticcheck // as above
	if tmpl.Labels["pool"] != "gpu" || len(tmpl.Taints) != 1 || tmpl.Taints[0].Key != "k" || tmpl.InstanceResource.RootDiskSize != 200 {
		t.Fatalf("configure not applied: %+v", tmpl)
	}

	other := changed
	other.Replicas = 3
	serviceError(t, configure(other, false), http.StatusBadRequest, cceemu.CodeInvalidParam)

	withPassword := changed
	withPassword.InstanceTemplate.AdminPassword = "Sup3r-secret!" //nolint:staticcheck // as above
	serviceError(t, configure(withPassword, false), http.StatusBadRequest, cceemu.CodeInvalidParam)
	if err := configure(withPassword, true); err != nil {
		t.Fatalf("configure with passwordNeedUpdate: %v", err)
	}
	g, err = c.GetInstanceGroup(&ccev2.GetInstanceGroupArgs{ClusterID: cid, InstanceGroupID: gid})
	if err != nil {
		t.Fatal(err)
	}
	if g.InstanceGroup.Spec.InstanceTemplate.AdminPassword != "" { //nolint:staticcheck // as above
		t.Fatal("GET echoed the password the configure call set")
	}
	if n := len(s.Requests(http.MethodPut, "/cluster/"+cid+"/instancegroup/"+gid+"/configure")); n != 4 {
		t.Fatalf("%d configure calls recorded, want 4", n)
	}
}
