package cce

import (
	"context"

	ccev2 "github.com/baidubce/bce-sdk-go/services/cce/v2"
)

// PoolInfo is everything CCE tells about a worker pool (secrets excepted), for import.
type PoolInfo struct {
	WorkerPool
	ID string
}

// Describe reads a cluster's settings and its worker pools, for `terraform import`.
func (c *Client) Describe(ctx context.Context, id string) (ClusterSpec, []PoolInfo, error) {
	resp, err := call(ctx, c, "read CCE cluster "+id, func(sdk *ccev2.Client) (*ccev2.GetClusterResponse, error) {
		return sdk.GetCluster(id)
	})
	if err != nil {
		return ClusterSpec{}, nil, err
	}
	var s ClusterSpec
	if resp.Cluster != nil && resp.Cluster.Spec != nil {
		sp := resp.Cluster.Spec
		s = ClusterSpec{Name: sp.ClusterName, Description: sp.Description, K8sVersion: string(sp.K8SVersion),
			Runtime: string(sp.RuntimeType), RuntimeVersion: sp.RuntimeVersion, VPCID: sp.VPCID,
			NetworkMode: string(sp.ContainerNetworkConfig.Mode), PodCIDR: sp.ContainerNetworkConfig.ClusterPodCIDR,
			ServiceCIDR: sp.ContainerNetworkConfig.ClusterIPServiceCIDR,
			MasterType:  string(sp.MasterConfig.MasterType), MasterFlavor: string(sp.MasterConfig.MasterFlavor),
			MasterZone: string(sp.MasterConfig.MasterVPCSubnetZone), MasterSubnetID: sp.MasterConfig.MasterVPCSubnetUUID,
			ExposedPublic: sp.MasterConfig.ExposedPublic}
	}
	groups, err := call(ctx, c, "list worker pools of CCE cluster "+id, func(sdk *ccev2.Client) (*ccev2.ListInstanceGroupResponse, error) {
		return sdk.ListInstanceGroups(&ccev2.ListInstanceGroupsArgs{ClusterID: id, ListOption: &ccev2.InstanceGroupListOption{PageNo: 1, PageSize: 100}})
	})
	if err != nil {
		return s, nil, err
	}
	var pools []PoolInfo
	for _, g := range groups.Page.List {
		if g == nil || g.Spec == nil {
			continue
		}
		t := g.Spec.InstanceTemplate.InstanceSpec
		p := PoolInfo{ID: g.Spec.CCEInstanceGroupID, WorkerPool: WorkerPool{
			Name: g.Spec.InstanceGroupName, Replicas: g.Spec.Replicas, MachineSpec: t.InstanceResource.MachineSpec,
			InstanceType: string(t.InstanceType), SubnetID: t.VPCConfig.VPCSubnetID, SecurityGroupID: t.VPCConfig.SecurityGroupID,
			Zone: string(t.VPCConfig.AvailableZone), RootDiskSize: t.InstanceResource.RootDiskSize, ImageID: t.ImageID,
			SSHKeyID: t.SSHKeyID, Labels: t.Labels, Taints: taintsOf(t.Taints),
		}}
		pools = append(pools, p)
	}
	return s, pools, nil
}
