package stack

import (
	"net/url"

	"k8s.io/utils/ptr"
)

// Validate checks what the schema cannot (see validate.go) and returns every problem found.
func (c Cube) Validate() FieldErrors {
	var ch checker
	ch.labelValue("stack", c.Stack)
	if c.DonefileURL == "" {
		ch.bad("donefile_url", "is required: set the training job's donefile_url (ctr_training_job.<name>.donefile_url)")
	} else if u, err := url.Parse(c.DonefileURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		ch.bad("donefile_url", "%q must be an http:// or https:// URL of base.txt", c.DonefileURL)
	}
	c.checkPorts(&ch)
	ch.resources("resources", c.Requests, c.Limits)
	ch.resources("transfer_resources", c.TransferRequests, c.TransferLimits)
	ch.securityContext("security_context", c.SecurityContext)
	ch.networkPolicy("network_policy", c.NetworkPolicy)
	ch.metrics("metrics", c.Metrics, c.NetworkPolicy, c.labels(componentCubeMetrics))
	ch.spread("spread", c.Spread)
	if c.Storage != nil {
		ch.quantity("storage.size", c.Storage.Size, DefaultCubeStorageSize)
		ch.dnsSubdomain("storage.storage_class", c.Storage.StorageClass, "StorageClass")
	}
	ch.quantity("transfer_storage", c.TransferStorage, DefaultTransferStorage)
	ch.dnsSubdomain("transfer_storage_class", c.TransferStorageClass, "StorageClass")
	ch.labels("node_selector", c.NodeSelector)
	ch.tolerations("tolerations", c.Tolerations)
	p := c.Pod
	ch.legacy("security_context", c.SecurityContext != nil, "pod.security_context", p != nil && p.SecurityContext != nil)
	ch.legacy("node_selector", c.NodeSelector != nil, "pod.node_selector", p != nil && p.NodeSelector != nil)
	ch.legacy("tolerations", c.Tolerations != nil, "pod.tolerations", p != nil && p.Tolerations != nil)
	ch.pod("pod", p)
	if len(ch.errs) == 0 && p != nil {
		bare := c
		bare.Pod, bare.SecurityContext, bare.NodeSelector, bare.Tolerations = nil, nil, nil, nil
		// The scrape annotations are defaults that pod.annotations may replace (withScrapeAnnotations).
		bare.Metrics = &Metrics{Annotations: ptr.To(false)}
		ch.checkPodCollisions(bare.Defaulted().objects(), map[string]podTarget{componentCubeServer: {"pod", p}, componentCubeTransfer: {"pod", p}})
	}
	return ch.errs
}

// checkPorts refuses two uses of one port: the servers, the transfer's status API and its
// files (apart, so that a NetworkPolicy admits only cube servers to them) each need their own,
// and the servers' port is not their probe port.
// The port that was set is blamed, not one left at its default.
func (c Cube) checkPorts(ch *checker) {
	d := c.Defaulted()
	if d.Port == CubeProbePort {
		ch.bad("port", "%d is the cube servers' probe port (the kubelet's probes, apart from the clients); choose another", CubeProbePort)
	}
	ports := []struct {
		path       string
		given, eff int32
	}{{"port", c.Port, d.Port}, {"transfer_port", c.TransferPort, d.TransferPort}, {"transfer_files_port", c.TransferFilesPort, d.TransferFilesPort}}
	for i := range ports {
		for j := 0; j < i; j++ {
			if ports[i].eff != ports[j].eff {
				continue
			}
			at, other := ports[i], ports[j]
			if at.given == 0 {
				at, other = other, at
			}
			ch.bad(at.path, "%d is also the %s; the servers, the transfer's status API and its files each need a port of their own", at.eff, other.path)
		}
	}
}
