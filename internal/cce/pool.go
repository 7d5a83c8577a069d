package cce

import (
	"context"
	"fmt"
	"time"

	bccapi "github.com/baidubce/bce-sdk-go/services/bcc/api"
	ccev2 "github.com/baidubce/bce-sdk-go/services/cce/v2"
	"github.com/baidubce/bce-sdk-go/services/cce/v2/types"
)

// WorkerPool is a CCE instance group: identical worker machines with a replica count.
type WorkerPool struct {
	Name            string
	Replicas        int
	MachineSpec     string // e.g. "bcc.g5.c8m32"
	InstanceType    string // BCC instance type, e.g. "N5"
	SubnetID        string
	SecurityGroupID string
	Zone            string
	RootDiskSize    int // GB
	ImageID         string
	Labels          map[string]string
	Taints          []Taint
	// AdminPassword and SSHKeyID are secrets: sent once at creation, never read back.
	AdminPassword string
	SSHKeyID      string
}

// Taint is a Kubernetes taint set on the pool's nodes.
type Taint struct{ Key, Value, Effect string }

// Pool is what CCE reports about a worker pool: its replicas, and what of its settings can
// change in place (so that a change made in the console shows as drift).
type Pool struct {
	ID            string
	Name          string
	Replicas      int
	ReadyReplicas int
	Labels        map[string]string
	Taints        []Taint
	RootDiskSize  int // GB
}

// groupSpec is the instance group CCE creates for p, or that a configure call sets.
func groupSpec(clusterID string, p WorkerPool) types.InstanceGroupSpec {
	var taints types.InstanceTaints
	for _, t := range p.Taints {
		taints = append(taints, types.Taint{Key: t.Key, Value: t.Value, Effect: types.TaintEffect(t.Effect)})
	}
	return types.InstanceGroupSpec{
		InstanceGroupName: p.Name,
		ClusterID:         clusterID,
		ClusterRole:       types.ClusterRoleNode,
		CleanPolicy:       types.DeleteCleanPolicy,
		Replicas:          p.Replicas,
		// The SDK marks instanceTemplate deprecated in favour of instanceTemplates, but CCE and
		// the baiducloud provider still use the single template for a homogeneous pool.
		InstanceTemplate: types.InstanceTemplate{InstanceSpec: types.InstanceSpec{ //nolint:staticcheck // see above
			InstanceName: p.Name,
			ClusterRole:  types.ClusterRoleNode,
			MachineType:  types.MachineTypeBCC,
			InstanceType: bccapi.InstanceType(p.InstanceType),
			VPCConfig: types.VPCConfig{
				VPCSubnetID:     p.SubnetID,
				SecurityGroupID: p.SecurityGroupID,
				AvailableZone:   types.AvailableZone(p.Zone),
			},
			InstanceResource: types.InstanceResource{MachineSpec: p.MachineSpec, RootDiskSize: p.RootDiskSize},
			ImageID:          p.ImageID,
			AdminPassword:    p.AdminPassword,
			SSHKeyID:         p.SSHKeyID,
			Labels:           p.Labels,
			Taints:           taints,
		}},
	}
}

// CreateWorkerPool creates the pool and returns its ID as soon as CCE answers. The request
// carries the admin password; CreateInstanceGroup does not print its arguments (unlike the
// SDK's CreateInstances, which the provider never calls for that reason).
func (c *Client) CreateWorkerPool(ctx context.Context, clusterID string, p WorkerPool) (string, error) {
	spec := groupSpec(clusterID, p)
	resp, err := call(ctx, c, "create worker pool "+p.Name+" of CCE cluster "+clusterID, func(sdk *ccev2.Client) (*ccev2.CreateInstanceGroupResponse, error) {
		return sdk.CreateInstanceGroup(&ccev2.CreateInstanceGroupArgs{ClusterID: clusterID, Request: &ccev2.CreateInstanceGroupRequest{InstanceGroupSpec: spec}})
	})
	if err != nil {
		return "", err
	}
	if resp.InstanceGroupID == "" {
		return "", fmt.Errorf("create worker pool %s: CCE answered without an ID (request ID %s)", p.Name, resp.RequestID)
	}
	return resp.InstanceGroupID, nil
}

// GetWorkerPool reads a pool; ErrNotFound when it is gone.
func (c *Client) GetWorkerPool(ctx context.Context, clusterID, id string) (*Pool, error) {
	resp, err := call(ctx, c, "read worker pool "+id+" of CCE cluster "+clusterID, func(sdk *ccev2.Client) (*ccev2.GetInstanceGroupResponse, error) {
		return sdk.GetInstanceGroup(&ccev2.GetInstanceGroupArgs{ClusterID: clusterID, InstanceGroupID: id})
	})
	if err != nil {
		return nil, err
	}
	ig := resp.InstanceGroup
	if ig == nil || ig.Spec == nil {
		return nil, fmt.Errorf("read worker pool %s: the answer has no instance group (request ID %s)", id, resp.RequestID)
	}
	t := ig.Spec.InstanceTemplate.InstanceSpec //nolint:staticcheck // the single template, as CreateWorkerPool sets it
	p := &Pool{ID: id, Name: ig.Spec.InstanceGroupName, Replicas: ig.Spec.Replicas, Labels: t.Labels,
		Taints: taintsOf(t.Taints), RootDiskSize: t.InstanceResource.RootDiskSize}
	if ig.Status != nil {
		p.ReadyReplicas = ig.Status.ReadyReplicas
	}
	return p, nil
}

func taintsOf(ts types.InstanceTaints) []Taint {
	var out []Taint
	for _, t := range ts {
		out = append(out, Taint{Key: t.Key, Value: t.Value, Effect: string(t.Effect)})
	}
	return out
}

// ConfigureWorkerPool sets what of a pool changes in place: its nodes' labels and taints
// (synced to the existing nodes too) and the root disk size of the machines it creates from
// now on. The pool's other settings and replicas go along unchanged (CCE takes the whole
// spec); the admin password is not sent, and stays as it was.
func (c *Client) ConfigureWorkerPool(ctx context.Context, clusterID, id string, p WorkerPool) error {
	p.AdminPassword = ""
	spec := groupSpec(clusterID, p)
	spec.CCEInstanceGroupID = id
	_, err := call(ctx, c, "configure worker pool "+id+" of CCE cluster "+clusterID, func(sdk *ccev2.Client) (*ccev2.UpdateInstanceGroupConfigureResponse, error) {
		return sdk.UpdateInstanceGroupConfigure(&ccev2.UpdateInstanceGroupConfigure{PasswordNeedUpdate: false, SyncMeta: true, InstanceGroupSpec: spec})
	})
	return err
}

// ScaleWorkerPool sets the replica count; removed machines are released.
func (c *Client) ScaleWorkerPool(ctx context.Context, clusterID, id string, replicas int) error {
	_, err := call(ctx, c, fmt.Sprintf("scale worker pool %s of CCE cluster %s to %d", id, clusterID, replicas), func(sdk *ccev2.Client) (*ccev2.UpdateInstanceGroupReplicasResponse, error) {
		return sdk.UpdateInstanceGroupReplicas(&ccev2.UpdateInstanceGroupReplicasArgs{ClusterID: clusterID, InstanceGroupID: id,
			Request: &ccev2.UpdateInstanceGroupReplicasRequest{Replicas: replicas, DeleteInstance: true,
				DeleteOption: &types.DeleteOption{DeleteResource: true}}})
	})
	return err
}

// WaitPoolReady polls until every replica of the pool is ready.
func (c *Client) WaitPoolReady(ctx context.Context, clusterID, id string, interval time.Duration, progress func(string)) (*Pool, error) {
	last := -1
	for {
		p, err := c.GetWorkerPool(ctx, clusterID, id)
		if err != nil {
			return nil, err
		}
		if p.ReadyReplicas != last {
			progress(fmt.Sprintf("worker pool %s: %d/%d nodes ready", id, p.ReadyReplicas, p.Replicas))
			last = p.ReadyReplicas
		}
		if p.ReadyReplicas == p.Replicas {
			return p, nil
		}
		select {
		case <-ctx.Done():
			return p, fmt.Errorf("worker pool %s has %d/%d nodes ready: %w", id, p.ReadyReplicas, p.Replicas, ctx.Err())
		case <-time.After(interval):
		}
	}
}
