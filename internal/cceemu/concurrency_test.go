package cceemu_test

import (
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	ccev2 "github.com/baidubce/bce-sdk-go/services/cce/v2"
	"github.com/baidubce/bce-sdk-go/services/cce/v2/types"

	"github.com/elasticctr/terraform-provider-ctr/internal/cceemu"
)

// Run with -race: request goroutines and a test goroutine injecting faults and inspecting state at once.
func TestConcurrentRequestsAndFaults(t *testing.T) {
	s, ep := startEmu(t, func(o *cceemu.Options) { o.Log = nil; o.PhaseDelay = time.Millisecond })
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 10; j++ {
				r := signedRequest(t, ep, http.MethodPost, cceemu.APIPrefix+"/cluster", nil, createBody(t, "c"), time.Now())
				if status, e := send(t, r); status != http.StatusOK && status != http.StatusServiceUnavailable {
					t.Errorf("create: %d %+v", status, e)
				}
				r = signedRequest(t, ep, http.MethodGet, cceemu.APIPrefix+"/clusters", url.Values{"pageNo": {"1"}, "pageSize": {"5"}}, nil, time.Now())
				if status, e := send(t, r); status != http.StatusOK && status != http.StatusServiceUnavailable {
					t.Errorf("list: %d %+v", status, e)
				}
			}
		}()
	}
	for i := 0; i < 20; i++ {
		s.FailRequests("", "/", http.StatusServiceUnavailable, "ServiceUnavailable", 1)
		s.SetPhaseDelay(time.Duration(i+1) * time.Millisecond)
		for _, c := range s.Clusters() {
			// A request for this cluster sees it or gets ClusterNotFound; both are fine here.
			_ = s.DeleteClusterOutOfBand(c.ID)
			break
		}
		_ = s.RouteCounts()
	}
	wg.Wait()
	if got := len(s.Requests(http.MethodPost, "/cluster")); got != 80 {
		t.Fatalf("%d creates recorded, want 80", got)
	}
}

func TestSDK_SlowPhasesAndInlineNodeGroups(t *testing.T) {
	s, ep := startEmu(t)
	c := newClient(t, ep, testAK, testSK)
	args := clusterArgs("inline", "1.34.2")
	args.CreateClusterRequest.NodeGroupSpecs = []*ccev2.InstanceGroupSpec{{
		InstanceGroupName: "pool-a",
		Replicas:          2,
		InstanceTemplate: ccev2.InstanceTemplate{InstanceSpec: types.InstanceSpec{
			InstanceResource: types.InstanceResource{MachineSpec: "bcc.g5.c2m8"}, AdminPassword: "pw-inline"}},
	}}
	s.SetPhaseDelay(time.Hour)
	res, err := c.CreateCluster(args)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * phaseDelay)
	if got, _ := c.GetCluster(res.ClusterID); got.Cluster.Status.ClusterPhase != types.ClusterPhasePending {
		t.Fatalf("phase %s under a one-hour delay", got.Cluster.Status.ClusterPhase)
	}
	groups := s.InstanceGroups(res.ClusterID)
	if len(groups) != 1 || groups[0].Name != "pool-a" || groups[0].Replicas != 2 || groups[0].ReadyReplicas != 0 {
		t.Fatalf("inline groups %+v", groups)
	}
	s.SetPhaseDelay(phaseDelay) // applies to the step already under way
	waitFor(t, "inline nodes ready", func() bool {
		got, err := c.GetCluster(res.ClusterID)
		return err == nil && got.Cluster.Status.NodeNum == 2
	})
	list, err := c.ListInstanceGroups(&ccev2.ListInstanceGroupsArgs{ClusterID: res.ClusterID, ListOption: &ccev2.InstanceGroupListOption{}})
	if err != nil || len(list.Page.List) != 1 || list.Page.List[0].Spec.InstanceTemplate.AdminPassword != "" {
		t.Fatalf("list %+v %v", list, err)
	}
}
