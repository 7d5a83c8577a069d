// Package kube talks to a Kubernetes cluster for the provider: connection, server-side
// apply of a rendered object set, pruning, drift read-back, waiting with watches and
// deletion that waits. It knows nothing of Terraform.
package kube

import (
	"errors"
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Connection says how to reach a cluster: a kubeconfig file (and context), or a host with
// a token or client certificate. Empty fields are unset; a zero Connection uses the
// default kubeconfig loading rules ($KUBECONFIG, ~/.kube/config).
type Connection struct {
	ConfigPath           string
	ConfigContext        string
	Host                 string
	Token                string
	ClientCertificate    string // PEM
	ClientKey            string // PEM
	ClusterCACertificate string // PEM
	Insecure             bool
}

// IsZero reports whether nothing is set.
func (c Connection) IsZero() bool { return c == Connection{} }

// RESTConfig builds a client configuration. Explicit host and credentials win over the
// kubeconfig file; the file (or the default rules) supplies the rest.
func (c Connection) RESTConfig() (*rest.Config, error) {
	if c.Host == "" && c.ConfigPath == "" && c.ConfigContext == "" && c.Token == "" && c.ClientCertificate == "" {
		if c.ClusterCACertificate != "" || c.ClientKey != "" || c.Insecure {
			return nil, errors.New("a connection that sets certificates or insecure also needs host or config_path")
		}
	}
	if c.Host != "" && c.ConfigPath == "" {
		cfg := &rest.Config{
			Host:        c.Host,
			BearerToken: c.Token,
			TLSClientConfig: rest.TLSClientConfig{
				Insecure: c.Insecure,
				CAData:   []byte(c.ClusterCACertificate),
				CertData: []byte(c.ClientCertificate),
				KeyData:  []byte(c.ClientKey),
			},
		}
		if c.Token == "" && c.ClientCertificate == "" {
			return nil, fmt.Errorf("connection to %s has no credentials: set token, or client_certificate and client_key", c.Host)
		}
		return withLimits(cfg), nil
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if c.ConfigPath != "" {
		rules.ExplicitPath = c.ConfigPath
	}
	overrides := &clientcmd.ConfigOverrides{CurrentContext: c.ConfigContext}
	if c.Host != "" {
		overrides.ClusterInfo = clientcmdapi.Cluster{Server: c.Host, InsecureSkipTLSVerify: c.Insecure,
			CertificateAuthorityData: []byte(c.ClusterCACertificate)}
	}
	if c.Token != "" {
		overrides.AuthInfo.Token = c.Token
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
	if err != nil {
		if c.ConfigPath != "" {
			return nil, fmt.Errorf("load kubeconfig %q: %w", c.ConfigPath, err)
		}
		return nil, fmt.Errorf("load kubeconfig (no connection configured; set the provider's or the resource's kubernetes block, or KUBECONFIG): %w", err)
	}
	return withLimits(cfg), nil
}

// withLimits sets the client's request rate as kubectl's: 50 a second, bursts of 300, so that
// applying a 64-shard cube (133 objects, a read and an apply each) is not held back by the
// client's own limiter.
func withLimits(cfg *rest.Config) *rest.Config {
	cfg.QPS, cfg.Burst = 50, 300
	cfg.UserAgent = "terraform-provider-ctr"
	return cfg
}
