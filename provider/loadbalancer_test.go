package provider

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/elasticctr/terraform-provider-ctr/internal/kube"
	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
)

// kwok runs no cloud controller: these tests play the cloud's load balancer controller and
// give the Service its address (status.loadBalancer.ingress) themselves.

// shortLoadBalancerWait makes apply give up on the address after a second, for this test.
// It changes a package variable, so its tests run alone, before the parallel ones: the
// t.Setenv (of a variable nothing reads) makes a test that also calls t.Parallel panic.
func shortLoadBalancerWait(t *testing.T) {
	t.Setenv("CTR_TEST_SHORT_LOAD_BALANCER_WAIT", "1")
	loadBalancerWaitFor = time.Second
	t.Cleanup(func() { loadBalancerWaitFor = loadBalancerWait })
}

const servingLoadBalancer = `  service_type        = "LoadBalancer"
  service_annotations = { "service.beta.kubernetes.io/aws-load-balancer-scheme" = "internet-facing" }
`

// TestAccServing_LoadBalancerAddress: a LoadBalancer Service with the cloud's annotations;
// apply waits for the load balancer's IP and exports it as HOST:PORT. Import reads it back,
// and turning the Service back into a ClusterIP one nulls the address.
func TestAccServing_LoadBalancerAddress(t *testing.T) {
	t.Parallel()
	k, ns, name := servingTest(t)
	config := servingConfig(ns, name, "1", servingLoadBalancer)
	k.run(t, ns, stack.ServingType, name, append([]resource.TestStep{{
		PreConfig: func() { k.loadBalance(t, ns, name, corev1.LoadBalancerIngress{IP: "203.0.113.10"}) },
		Config:    config,
		ConfigStateChecks: []statecheck.StateCheck{
			statecheck.ExpectKnownValue(servingAddr, tfjsonpath.New("load_balancer_address"), knownvalue.StringExact("203.0.113.10:8010")),
		},
		Check: k.serviceAnnotated(ns, name, map[string]string{"service.beta.kubernetes.io/aws-load-balancer-scheme": "internet-facing"}),
	}}, append(importRoundTrip("ctr_serving", ns+"/"+name, config), resource.TestStep{
		Config: servingConfig(ns, name, "1", ""),
		ConfigStateChecks: []statecheck.StateCheck{
			statecheck.ExpectKnownValue(servingAddr, tfjsonpath.New("load_balancer_address"), knownvalue.Null()),
		},
	})...)...)
}

// TestAccServing_LoadBalancerAddressLate: no address within the (here shortened) bound: the
// apply succeeds, the serving is not tainted (the next plan is empty) and the address is null;
// once the load balancer has one, a refresh reads it, and the plan stays empty.
func TestAccServing_LoadBalancerAddressLate(t *testing.T) {
	shortLoadBalancerWait(t)
	k, ns, name := servingTest(t)
	config := servingConfig(ns, name, "1", servingLoadBalancer)
	k.run(t, ns, stack.ServingType, name, k.addressLate(t, config, servingAddr, "load_balancer_address",
		ns, name, corev1.LoadBalancerIngress{Hostname: "a1b2.elb.example.com"}, "a1b2.elb.example.com:8010")...)
}

// addressLate are the steps of an address that comes after the apply's bounded wait: the
// apply leaves the attribute (addr's attr) null and nothing tainted (the next plan is empty);
// once the Service (ns/svc) has ingress, a refresh reads it as want, and the plan stays empty.
func (k *kubeClients) addressLate(t *testing.T, config, addr, attr, ns, svc string, ingress corev1.LoadBalancerIngress, want string) []resource.TestStep {
	return []resource.TestStep{
		{
			Config: config,
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(addr, tfjsonpath.New(attr), knownvalue.Null()),
			},
			ConfigPlanChecks: resource.ConfigPlanChecks{PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
		},
		{
			PreConfig: func() {
				require.NoError(t, k.setIngress(context.Background(), ns, svc, ingress))
			},
			Config:           config,
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(addr, tfjsonpath.New(attr), knownvalue.StringExact(want)),
			},
		},
	}
}

// TestAccTrainingJob_FileServerLoadBalancer: the file server's Service carries the
// annotations, and its external URL is http://HOST:PORT of the load balancer's hostname.
func TestAccTrainingJob_FileServerLoadBalancer(t *testing.T) {
	t.Parallel()
	k, ns, name := trainingJobTest(t)
	config := trainingJobConfig(ns, name, `  file_server = { service_type = "LoadBalancer", port = 8081,
    service_annotations = { "service.beta.kubernetes.io/cce-load-balancer-internal-vpc" = "true" } }
`)
	k.run(t, ns, stack.TrainingJobType, name, append([]resource.TestStep{{
		PreConfig: func() {
			k.loadBalance(t, ns, name+"-fileserver", corev1.LoadBalancerIngress{Hostname: "fs.lb.example.com"})
		},
		Config: config,
		ConfigStateChecks: []statecheck.StateCheck{
			statecheck.ExpectKnownValue(jobAddr, tfjsonpath.New("file_server_external_url"), knownvalue.StringExact("http://fs.lb.example.com:8081")),
		},
		Check: k.serviceAnnotated(ns, name+"-fileserver", map[string]string{"service.beta.kubernetes.io/cce-load-balancer-internal-vpc": "true"}),
	}}, importRoundTrip("ctr_training_job", ns+"/"+name, config, "last_condition", "tasks")...)...)
}

// TestAccTrainingJob_FileServerLoadBalancerLate: no address in time is a warning, not a
// tainted job; a refresh reads the address once there is one.
func TestAccTrainingJob_FileServerLoadBalancerLate(t *testing.T) {
	shortLoadBalancerWait(t)
	k, ns, name := trainingJobTest(t)
	config := trainingJobConfig(ns, name, `  file_server = { service_type = "LoadBalancer" }
`)
	k.run(t, ns, stack.TrainingJobType, name, k.addressLate(t, config, jobAddr, "file_server_external_url",
		ns, name+"-fileserver", corev1.LoadBalancerIngress{IP: "203.0.113.20"}, "http://203.0.113.20:8080")...)
}

// TestAwaitAddress: the bounded wait itself, on a live Service: the address when it comes,
// else null with a warning and no error (the apply succeeds, nothing is tainted).
func TestAwaitAddress(t *testing.T) {
	k := requireCluster(t)
	ns := k.namespace(t)
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	require.NoError(t, err)
	kc, err := kube.NewClient(cfg)
	require.NoError(t, err)
	ctx := context.Background()
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "lb", Namespace: ns},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 8010}}}}
	_, err = k.cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{})
	require.NoError(t, err)
	obj := kube.RefFromManifestKey("v1/Service/lb")
	require.NotNil(t, obj)
	obj.SetNamespace(ns)

	shortLoadBalancerWait(t)
	var diags diag.Diagnostics
	got := awaitAddress(ctx, kc, obj, hostPort, &diags)
	assert.True(t, got.IsNull())
	require.Len(t, diags, 1)
	assert.Equal(t, diag.SeverityWarning, diags[0].Severity())
	assert.Equal(t, loadBalancerNoAddress, diags[0].Summary())
	assert.Contains(t, diags[0].Detail(), "kubectl -n "+ns+" describe service lb")

	require.NoError(t, k.setIngress(ctx, ns, "lb", corev1.LoadBalancerIngress{IP: "2001:db8::1"}))
	diags = nil
	got = awaitAddress(ctx, kc, obj, hostPort, &diags)
	assert.Empty(t, diags)
	assert.Equal(t, "[2001:db8::1]:8010", got.ValueString())
}

// TestPlannedAddress: the address is unknown in the plan only where the apply will wait for
// it; kept where the Service stays a LoadBalancer with an address or nothing changes.
func TestPlannedAddress(t *testing.T) {
	t.Parallel()
	lb, cip := types.StringValue("LoadBalancer"), types.StringValue("ClusterIP")
	addr := types.StringValue("203.0.113.10:8010")
	for name, c := range map[string]struct {
		typ, priorType types.String
		unchanged      bool
		prior, want    types.String
	}{
		"not a load balancer":               {cip, cip, false, types.StringNull(), types.StringNull()},
		"no longer a load balancer":         {cip, lb, false, addr, types.StringNull()},
		"created":                           {lb, types.StringNull(), false, types.StringNull(), types.StringUnknown()},
		"turned into a load balancer":       {lb, cip, false, types.StringNull(), types.StringUnknown()},
		"updated, address kept":             {lb, lb, false, addr, addr},
		"nothing changes, still no address": {lb, lb, true, types.StringNull(), types.StringNull()},
		"updated, no address yet: wait":     {lb, lb, false, types.StringNull(), types.StringUnknown()},
		"type known only after apply":       {types.StringUnknown(), lb, false, addr, types.StringUnknown()},
	} {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, c.want, plannedAddress(c.typ, c.priorType, c.unchanged, c.prior))
		})
	}
}
