package provider

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/elasticctr/terraform-provider-ctr/internal/kube"
	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
	"github.com/elasticctr/terraform-provider-ctr/provider/internal/diagnostics"
)

// The address a Service of type LoadBalancer gets from the cloud (ctr_serving's
// load_balancer_address, the training job's file_server_external_url).

// loadBalancerWait bounds how long an apply waits for a LoadBalancer Service's address,
// inside the resource's create or update timeout. Cloud load balancers usually take one to
// three minutes.
const loadBalancerWait = 5 * time.Minute

// loadBalancerWaitFor is the bound in use: loadBalancerWait, shortened only by tests.
var loadBalancerWaitFor = loadBalancerWait

// loadBalancerNoAddress is the summary of the warning an apply ends with when no address came.
const loadBalancerNoAddress = "Load Balancer Address Not Yet Assigned"

const loadBalancerType = string(corev1.ServiceTypeLoadBalancer)

// loadBalancerWaitDoc says, for the docs, how apply waits for an address.
var loadBalancerWaitDoc = fmt.Sprintf("Apply waits for the address up to %s (within `timeouts`), logging progress; when none comes in "+
	"time the apply still succeeds, with a warning, and the attribute stays null until a refresh (the next plan, or "+
	"`terraform apply -refresh-only`) reads it. Null unless `service_type = \"%s\"`.", loadBalancerWait, loadBalancerType)

// serviceAnnotationsAttribute is `service_annotations` of a Service.
func serviceAnnotationsAttribute(service string) schema.MapAttribute {
	return schema.MapAttribute{Optional: true, ElementType: types.StringType,
		MarkdownDescription: "Annotations of " + service + ". Cloud load balancers (`service_type = \"" + loadBalancerType + "\"`) are configured " +
			"with them, e.g. `service.beta.kubernetes.io/aws-load-balancer-scheme = \"internet-facing\"` on EKS or CCE's " +
			"`service.beta.kubernetes.io/cce-load-balancer-*`. Keys must be Kubernetes annotation keys, not under " +
			quoted(stack.ReservedAnnotationPrefixes) + ". Changes in place."}
}

// plannedAddress plans a load balancer address: null unless the Service is a LoadBalancer;
// the prior state's while it stays one and either the apply changes nothing in the cluster
// (unchanged) or it already has an address (which the same Service keeps); unknown
// otherwise (created, turned into a LoadBalancer, or still without an address): the apply
// waits for it.
func plannedAddress(serviceType, priorType types.String, unchanged bool, prior types.String) types.String {
	switch {
	case serviceType.IsUnknown():
		return types.StringUnknown()
	case serviceType.ValueString() != loadBalancerType:
		return types.StringNull()
	case priorType.ValueString() == loadBalancerType && (unchanged || (!prior.IsNull() && !prior.IsUnknown())):
		return prior
	}
	return types.StringUnknown()
}

// liveAddress is the address of a live Service (nil: missing), formatted; null when it is no
// LoadBalancer or has no address yet.
func liveAddress(svc *unstructured.Unstructured, format func(host string, port int32) string) types.String {
	if svc == nil {
		return types.StringNull()
	}
	typ, _, _ := unstructured.NestedString(svc.Object, "spec", "type")
	host := kube.LoadBalancerHost(svc)
	if typ != loadBalancerType || host == "" {
		return types.StringNull()
	}
	return types.StringValue(format(host, servicePort(svc)))
}

// servicePort is the first port of a live Service.
func servicePort(svc *unstructured.Unstructured) int32 {
	ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
	if len(ports) == 0 {
		return 0
	}
	p, _ := ports[0].(map[string]any)
	n, _ := p["port"].(int64)
	return int32(n)
}

// hostPort is ctr_serving's load_balancer_address: HOST:PORT ([IPv6]:PORT).
func hostPort(host string, port int32) string { return net.JoinHostPort(host, strconv.Itoa(int(port))) }

// httpURL is the file server's external URL.
func httpURL(host string, port int32) string { return "http://" + hostPort(host, port) }

// awaitAddress waits, at most loadBalancerWaitFor, for the Service to get an address from its
// load balancer, and returns it formatted; null, with a warning, when none came: the objects
// are applied and working, so the apply succeeds and the resource is not tainted.
func awaitAddress(ctx context.Context, kc *kube.Client, svc *unstructured.Unstructured, format func(string, int32) string, diags *diag.Diagnostics) types.String {
	wctx, cancel := context.WithTimeout(ctx, loadBalancerWaitFor)
	defer cancel()
	tflog.Info(ctx, fmt.Sprintf("waiting up to %s for the load balancer address of %s", loadBalancerWaitFor, kube.Describe(svc)))
	live, err := kc.WaitFor(wctx, svc, kube.LoadBalancerReady)
	if err == nil {
		return liveAddress(live, format)
	}
	diags.Append(diagnostics.Warning(loadBalancerNoAddress,
		fmt.Sprintf("%s got no address from its load balancer within %s (%s). The apply went through; the address stays null "+
			"until a refresh (the next plan, or terraform apply -refresh-only) reads it", kube.Describe(svc), loadBalancerWaitFor,
			strings.TrimSpace(err.Error())),
		fmt.Sprintf("If it never comes, the Service's events say why: kubectl -n %s describe service %s. Cloud load balancers are "+
			"configured through service_annotations.", svc.GetNamespace(), svc.GetName())))
	return types.StringNull()
}
