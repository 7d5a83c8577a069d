package cce

import (
	"context"
	"fmt"
	"strings"
	"time"

	ccev2 "github.com/baidubce/bce-sdk-go/services/cce/v2"
	"github.com/baidubce/bce-sdk-go/services/cce/v2/types"
)

// ClusterSpec is what ctr_cluster asks of CCE. Server-side enums (versions, runtimes, network
// modes, flavors) are passed through as strings: CCE judges them, not a list of ours that
// would go stale.
type ClusterSpec struct {
	Name           string
	Description    string
	K8sVersion     string
	Runtime        string
	RuntimeVersion string
	VPCID          string
	NetworkMode    string
	PodCIDR        string
	ServiceCIDR    string
	MasterType     string
	MasterFlavor   string
	MasterZone     string
	MasterSubnetID string
	ExposedPublic  bool
}

// Cluster is what CCE reports about a cluster.
type Cluster struct {
	ID         string
	Name       string
	K8sVersion string
	Phase      string
	NodeNum    int
	// Failed is set for phases that will not turn into running by themselves.
	Failed bool
}

// Phases a cluster passes through on its way to running, and ones it will not leave alone.
var (
	PendingPhases = []string{"pending", "provisioning", "provisioned"}
	FailedPhases  = []string{"create_failed", "delete_failed", "deleted", "deleting"}
)

// CreateCluster asks CCE for a cluster and returns its ID as soon as CCE answers, before the
// cluster exists: the caller saves it at once so that nothing is orphaned.
func (c *Client) CreateCluster(ctx context.Context, s ClusterSpec) (string, error) {
	spec := &types.ClusterSpec{
		ClusterName:    s.Name,
		ClusterType:    types.ClusterTypeNormal,
		Description:    s.Description,
		K8SVersion:     types.K8SVersion(s.K8sVersion),
		RuntimeType:    types.RuntimeType(s.Runtime),
		RuntimeVersion: s.RuntimeVersion,
		VPCID:          s.VPCID,
		MasterConfig: types.MasterConfig{
			MasterType:    types.MasterType(s.MasterType),
			ExposedPublic: s.ExposedPublic,
			ManagedClusterMasterOption: types.ManagedClusterMasterOption{
				MasterVPCSubnetZone: types.AvailableZone(s.MasterZone),
				MasterVPCSubnetUUID: s.MasterSubnetID,
				MasterFlavor:        types.MasterFlavor(s.MasterFlavor),
			},
		},
		ContainerNetworkConfig: types.ContainerNetworkConfig{
			Mode:                 types.ContainerNetworkMode(s.NetworkMode),
			ClusterPodCIDR:       s.PodCIDR,
			ClusterIPServiceCIDR: s.ServiceCIDR,
		},
	}
	resp, err := call(ctx, c, "create CCE cluster "+s.Name, func(sdk *ccev2.Client) (*ccev2.CreateClusterResponse, error) {
		return sdk.CreateCluster(&ccev2.CreateClusterArgs{CreateClusterRequest: &ccev2.CreateClusterRequest{ClusterSpec: spec}})
	})
	if err != nil {
		return "", err
	}
	if resp.ClusterID == "" {
		return "", fmt.Errorf("create CCE cluster %s: CCE answered without a cluster ID (request ID %s)", s.Name, resp.RequestID)
	}
	return resp.ClusterID, nil
}

// GetCluster reads a cluster; ErrNotFound when it is gone.
func (c *Client) GetCluster(ctx context.Context, id string) (*Cluster, error) {
	resp, err := call(ctx, c, "read CCE cluster "+id, func(sdk *ccev2.Client) (*ccev2.GetClusterResponse, error) {
		return sdk.GetCluster(id)
	})
	if err != nil {
		return nil, err
	}
	if resp.Cluster == nil || resp.Cluster.Spec == nil || resp.Cluster.Status == nil {
		return nil, fmt.Errorf("read CCE cluster %s: the answer has no cluster (request ID %s)", id, resp.RequestID)
	}
	cl := &Cluster{
		ID:         id,
		Name:       resp.Cluster.Spec.ClusterName,
		K8sVersion: string(resp.Cluster.Spec.K8SVersion),
		Phase:      string(resp.Cluster.Status.ClusterPhase),
		NodeNum:    resp.Cluster.Status.NodeNum,
	}
	for _, p := range FailedPhases {
		if cl.Phase == p {
			cl.Failed = true
		}
	}
	return cl, nil
}

// FailureReasons returns CCE's own account of why a cluster operation failed, from its event
// steps: "step: code: message (suggestion)" for every failed step.
func (c *Client) FailureReasons(ctx context.Context, id string) []string {
	resp, err := call(ctx, c, "read events of CCE cluster "+id, func(sdk *ccev2.Client) (*ccev2.GetEventStepsResponse, error) {
		return sdk.GetClusterEventSteps(id)
	})
	if err != nil {
		return []string{"(the event steps could not be read: " + err.Error() + ")"}
	}
	var out []string
	for _, s := range resp.Steps {
		if s == nil {
			continue
		}
		e := s.ErrorInfo
		if e.Code == "" && e.Message == "" && s.ErrMsg == "" {
			continue
		}
		msg := s.StepName + ": "
		if e.Code != "" {
			msg += e.Code + ": "
		}
		if e.Message != "" {
			msg += e.Message
		} else {
			msg += s.ErrMsg
		}
		if e.Suggestion != "" {
			msg += " (suggestion: " + e.Suggestion + ")"
		}
		out = append(out, msg)
	}
	return out
}

// WaitRunning polls the cluster until it runs, failing with CCE's reasons when it will not.
// CCE offers no watch; poll every interval and report each phase change through progress.
func (c *Client) WaitRunning(ctx context.Context, id string, interval time.Duration, progress func(string)) (*Cluster, error) {
	last := ""
	start := time.Now()
	for {
		cl, err := c.GetCluster(ctx, id)
		if err != nil {
			return nil, err
		}
		if cl.Phase != last {
			progress(fmt.Sprintf("CCE cluster %s: phase %s (%s)", id, cl.Phase, time.Since(start).Round(time.Second)))
			last = cl.Phase
		}
		if cl.Phase == "running" {
			return cl, nil
		}
		if cl.Failed {
			reasons := c.FailureReasons(ctx, id)
			if len(reasons) == 0 {
				reasons = []string{"CCE gave no reason"}
			}
			return cl, fmt.Errorf("CCE cluster %s is %s: %s", id, cl.Phase, strings.Join(reasons, "; "))
		}
		select {
		case <-ctx.Done():
			return cl, fmt.Errorf("CCE cluster %s still %s after %s: %w", id, cl.Phase, time.Since(start).Round(time.Second), ctx.Err())
		case <-time.After(interval):
		}
	}
}

// DeleteOptions say what CCE removes with the cluster.
type DeleteOptions struct {
	DeleteResource    bool // release the worker machines
	DeleteCDSSnapshot bool // and their disk snapshots
}

// DeleteCluster deletes the cluster and waits until CCE no longer knows it.
func (c *Client) DeleteCluster(ctx context.Context, id string, o DeleteOptions, interval time.Duration, progress func(string)) error {
	_, err := call(ctx, c, "delete CCE cluster "+id, func(sdk *ccev2.Client) (*ccev2.DeleteClusterResponse, error) {
		return sdk.DeleteCluster(&ccev2.DeleteClusterArgs{ClusterID: id, DeleteResource: o.DeleteResource, DeleteCDSSnapshot: o.DeleteCDSSnapshot})
	})
	if IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	last := ""
	for {
		cl, err := c.GetCluster(ctx, id)
		if IsNotFound(err) {
			progress(fmt.Sprintf("CCE cluster %s: deleted", id))
			return nil
		}
		if err != nil {
			return err
		}
		if cl.Phase != last {
			progress(fmt.Sprintf("CCE cluster %s: phase %s", id, cl.Phase))
			last = cl.Phase
		}
		if cl.Phase == "deleted" {
			return nil
		}
		if cl.Phase == "delete_failed" {
			return fmt.Errorf("CCE could not delete cluster %s: %s", id, strings.Join(c.FailureReasons(ctx, id), "; "))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("CCE cluster %s still %s: %w", id, cl.Phase, ctx.Err())
		case <-time.After(interval):
		}
	}
}

// Kubeconfig returns the cluster's kubeconfig of the given type ("vpc" or "public").
func (c *Client) Kubeconfig(ctx context.Context, id, kind string) (string, error) {
	resp, err := call(ctx, c, "read kubeconfig of CCE cluster "+id, func(sdk *ccev2.Client) (*ccev2.GetKubeConfigResponse, error) {
		return sdk.GetKubeConfig(&ccev2.GetKubeConfigArgs{ClusterID: id, KubeConfigType: ccev2.KubeConfigType(kind)})
	})
	if err != nil {
		return "", err
	}
	if resp.KubeConfig == "" {
		return "", fmt.Errorf("read kubeconfig of CCE cluster %s: empty answer (request ID %s)", id, resp.RequestID)
	}
	return resp.KubeConfig, nil
}
