// Package kube talks to a Kubernetes cluster for the provider: connection, server-side
// apply of a rendered object set, pruning, drift read-back, waiting with watches and
// deletion that waits. It knows nothing of Terraform.
package kube

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Connection says how to reach a cluster, with the settings of the hashicorp kubernetes
// provider: kubeconfig files (and a context in them), and explicit values that override what
// the files say (host, credentials, TLS, proxy, an exec credential plugin). Empty fields are
// unset. Nothing is implicit: a zero Connection reaches no cluster (ErrNoConnection), it never
// falls back to $KUBECONFIG or ~/.kube/config.
type Connection struct {
	// ConfigPaths are kubeconfig files, merged as kubectl merges $KUBECONFIG (the first file
	// that sets a value wins). One path must exist; of several, missing ones are skipped.
	// A leading "~" is the user's home directory.
	ConfigPaths           []string
	ConfigContext         string // the context to use instead of the files' current-context
	ConfigContextAuthInfo string // the kubeconfig user to use instead of the context's
	ConfigContextCluster  string // the kubeconfig cluster to use instead of the context's

	Host                 string // API server URL; a bare host:port gets https://
	Token                string
	ClientCertificate    string // PEM
	ClientKey            string // PEM
	ClusterCACertificate string // PEM
	Insecure             bool
	TLSServerName        string
	ProxyURL             string
	Exec                 *ExecPlugin
}

// ExecPlugin is a client-go credential plugin: a command that prints an ExecCredential,
// run by client-go whenever it needs a token (and again when the token expires).
type ExecPlugin struct {
	APIVersion string // client.authentication.k8s.io/v1 or v1beta1
	Command    string
	Args       []string
	Env        map[string]string
}

// ErrNoConnection is RESTConfig's answer for a Connection that sets nothing.
var ErrNoConnection = errors.New("no connection to a Kubernetes cluster is configured")

// IsZero reports whether nothing is set.
func (c Connection) IsZero() bool {
	return len(c.ConfigPaths) == 0 && c.ConfigContext == "" && c.ConfigContextAuthInfo == "" && c.ConfigContextCluster == "" &&
		c.Host == "" && c.Token == "" && c.ClientCertificate == "" && c.ClientKey == "" && c.ClusterCACertificate == "" &&
		!c.Insecure && c.TLSServerName == "" && c.ProxyURL == "" && c.Exec == nil
}

// RESTConfig builds a client configuration with client-go's own kubeconfig loading: the files
// (only those named: no default rules), then the explicit values as overrides, as kubectl's
// flags override a kubeconfig. An exec plugin runs when the client first needs a token.
func (c Connection) RESTConfig() (*rest.Config, error) {
	if c.IsZero() {
		return nil, ErrNoConnection
	}
	paths, err := c.expandedPaths()
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		if c.Host == "" {
			return nil, errors.New("a connection without a kubeconfig (config_path or config_paths) needs host")
		}
		if c.Token == "" && c.ClientCertificate == "" && c.Exec == nil {
			return nil, fmt.Errorf("connection to %s has no credentials: set token, client_certificate and client_key, or exec", c.Host)
		}
	}
	rules := &clientcmd.ClientConfigLoadingRules{}
	switch len(paths) {
	case 0:
	case 1:
		rules.ExplicitPath = paths[0]
	default:
		rules.Precedence = paths
	}
	overrides, err := c.overrides()
	if err != nil {
		return nil, err
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
	if err != nil {
		if len(paths) > 0 {
			return nil, fmt.Errorf("load kubeconfig %s: %w", strings.Join(quoted(paths), ", "), err)
		}
		return nil, fmt.Errorf("configure the connection to %s: %w", c.Host, err)
	}
	return withLimits(cfg), nil
}

// overrides are the explicit values, as clientcmd applies kubectl's flags over a kubeconfig.
func (c Connection) overrides() (*clientcmd.ConfigOverrides, error) {
	o := &clientcmd.ConfigOverrides{
		CurrentContext: c.ConfigContext,
		Context:        clientcmdapi.Context{AuthInfo: c.ConfigContextAuthInfo, Cluster: c.ConfigContextCluster},
	}
	o.ClusterInfo.InsecureSkipTLSVerify = c.Insecure
	o.ClusterInfo.TLSServerName = c.TLSServerName
	o.ClusterDefaults.ProxyURL = c.ProxyURL
	if c.ClusterCACertificate != "" {
		o.ClusterInfo.CertificateAuthorityData = []byte(c.ClusterCACertificate)
	}
	if c.Host != "" {
		// The complete URL: overrides are applied too late for clientcmd to add a scheme.
		tls := c.ClusterCACertificate != "" || c.ClientCertificate != "" || c.Insecure
		u, _, err := rest.DefaultServerURL(c.Host, "", schema.GroupVersion{}, tls)
		if err != nil {
			return nil, fmt.Errorf("host %q: %w", c.Host, err)
		}
		o.ClusterInfo.Server = u.String()
	}
	if c.ClientCertificate != "" {
		o.AuthInfo.ClientCertificateData = []byte(c.ClientCertificate)
	}
	if c.ClientKey != "" {
		o.AuthInfo.ClientKeyData = []byte(c.ClientKey)
	}
	o.AuthInfo.Token = c.Token
	if e := c.Exec; e != nil {
		x := &clientcmdapi.ExecConfig{
			APIVersion: e.APIVersion, Command: e.Command, Args: e.Args,
			// Terraform gives a plugin no terminal to prompt on.
			InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
		}
		names := make([]string, 0, len(e.Env))
		for k := range e.Env {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			x.Env = append(x.Env, clientcmdapi.ExecEnvVar{Name: k, Value: e.Env[k]})
		}
		o.AuthInfo.Exec = x
	}
	return o, nil
}

// expandedPaths are ConfigPaths with a leading "~" replaced by the home directory.
func (c Connection) expandedPaths() ([]string, error) {
	out := make([]string, 0, len(c.ConfigPaths))
	for _, p := range c.ConfigPaths {
		e, err := ExpandHome(p)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// ExpandHome replaces a leading "~" (alone or before a separator) with the user's home
// directory, as a shell does; "~user" is not expanded.
func ExpandHome(p string) (string, error) {
	if p != "~" && !strings.HasPrefix(p, "~/") && !strings.HasPrefix(p, "~"+string(filepath.Separator)) {
		return p, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("expand %q: %w", p, err)
	}
	return filepath.Join(home, p[1:]), nil
}

func quoted(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

// withLimits sets the client's request rate as kubectl's: 50 a second, bursts of 300, so that
// applying a 64-shard cube (two objects per shard, a read and an apply each) is not held back by the
// client's own limiter.
func withLimits(cfg *rest.Config) *rest.Config {
	cfg.QPS, cfg.Burst = 50, 300
	cfg.UserAgent = "terraform-provider-ctr"
	return cfg
}
