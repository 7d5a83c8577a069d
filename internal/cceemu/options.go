package cceemu

import (
	"io"
	"slices"
	"time"
)

// Options configure a Server. The zero value is usable but accepts no credentials.
type Options struct {
	// Credentials maps each accepted access key to its secret key.
	Credentials map[string]string
	// STSTokens maps an access key to the session token (x-bce-security-token) that must accompany it.
	// Access keys listed here are STS keys; requests with them and without the token are rejected.
	STSTokens map[string]string
	// Kubeconfig is the YAML returned by GET /kubeconfig for a running cluster, whatever its type.
	Kubeconfig string
	// PhaseDelay is the time each phase step takes (cluster phases, one instance-group node becoming
	// ready, a deleting cluster disappearing). If zero, it defaults to 300ms.
	PhaseDelay time.Duration
	// K8sVersions are the Kubernetes versions POST /cluster accepts. If nil, DefaultK8sVersions.
	K8sVersions []string
	// RuntimeTypes are the container runtimes POST /cluster accepts. If nil, DefaultRuntimeTypes.
	RuntimeTypes []string
	// NetworkModes are the containerNetworkConfig.mode values POST /cluster accepts. If nil,
	// DefaultNetworkModes.
	NetworkModes []string
	// MaxClockSkew bounds how far a request's signing time may lie from the server's clock, either way.
	// If zero, the signature's own expireSeconds is the bound (1800s for bce-sdk-go).
	MaxClockSkew time.Duration
	// Log receives one line per request. If nil, nothing is logged.
	Log io.Writer
}

// DefaultK8sVersions are the versions accepted when Options.K8sVersions is nil: the ones bce-sdk-go v0.9.277
// still names that CCE offers for new clusters. Guess: the real list changes over time and by region.
var DefaultK8sVersions = []string{"1.34.2", "1.32.7", "1.31.1", "1.30.1", "1.28.8", "1.26.9", "1.24.4"}

// DefaultRuntimeTypes are the runtimes accepted when Options.RuntimeTypes is nil.
var DefaultRuntimeTypes = []string{"containerd", "docker"}

// DefaultNetworkModes are the network modes accepted when Options.NetworkModes is nil: the SDK's constants
// plus "vpc-eni", which the service accepts although the SDK does not name it.
var DefaultNetworkModes = []string{
	"vpc-eni", "kubenet", "vpc-cni", "vpc-route-veth", "vpc-route-ipvlan", "vpc-route-auto-detect",
	"vpc-secondary-ip-veth", "vpc-secondary-ip-ipvlan", "vpc-secondary-ip-auto-detect",
}

const defaultPhaseDelay = 300 * time.Millisecond

// withDefaults returns a copy of o with every defaulted field filled in; the slices are copied so that
// later changes by the caller cannot race with request handlers.
func (o Options) withDefaults() Options {
	if o.PhaseDelay <= 0 {
		o.PhaseDelay = defaultPhaseDelay
	}
	o.K8sVersions = slices.Clone(orDefault(o.K8sVersions, DefaultK8sVersions))
	o.RuntimeTypes = slices.Clone(orDefault(o.RuntimeTypes, DefaultRuntimeTypes))
	o.NetworkModes = slices.Clone(orDefault(o.NetworkModes, DefaultNetworkModes))
	if o.Log == nil {
		o.Log = io.Discard
	}
	return o
}

func orDefault(v, def []string) []string {
	if v == nil {
		return def
	}
	return v
}
