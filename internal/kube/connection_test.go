package kube

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// kubeconfig writes a kubeconfig with two contexts (current: "a") into dir.
func kubeconfig(t *testing.T, dir, name, serverA, serverB string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, []byte(`apiVersion: v1
kind: Config
current-context: a
clusters:
- name: a
  cluster: {server: "`+serverA+`"}
- name: b
  cluster: {server: "`+serverB+`"}
users:
- name: ua
  user: {token: token-a}
- name: ub
  user: {token: token-b}
contexts:
- name: a
  context: {cluster: a, user: ua}
- name: b
  context: {cluster: b, user: ub}
`), 0o600))
	return p
}

func TestConnection_NothingIsImplicit(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("HOME", dir)
	t.Setenv("KUBECONFIG", kubeconfig(t, dir, "config", "https://a:6443", "https://b:6443"))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, ".kube"), 0o700))
	kubeconfig(t, filepath.Join(dir, ".kube"), "config", "https://a:6443", "https://b:6443")
	_, err := Connection{}.RESTConfig()
	assert.True(t, errors.Is(err, ErrNoConnection), "a zero connection must not load $KUBECONFIG or ~/.kube/config: %v", err)
}

func TestConnection_HomeExpanded(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	require.NoError(t, os.MkdirAll(filepath.Join(home, ".kube"), 0o700))
	kubeconfig(t, filepath.Join(home, ".kube"), "config", "https://a:6443", "https://b:6443")
	cfg, err := Connection{ConfigPaths: []string{"~/.kube/config"}}.RESTConfig()
	require.NoError(t, err)
	assert.Equal(t, "https://a:6443", cfg.Host)
	assert.Equal(t, "token-a", cfg.BearerToken)

	for in, want := range map[string]string{"~": home, "~/x": filepath.Join(home, "x"), "/abs/~/x": "/abs/~/x", "~user/x": "~user/x", "rel": "rel"} {
		got, err := ExpandHome(in)
		require.NoError(t, err)
		assert.Equal(t, want, got, in)
	}
}

func TestConnection_ContextsAndOverrides(t *testing.T) {
	p := kubeconfig(t, t.TempDir(), "config", "https://a:6443", "https://b:6443")
	cfg, err := Connection{ConfigPaths: []string{p}, ConfigContext: "b"}.RESTConfig()
	require.NoError(t, err)
	assert.Equal(t, "https://b:6443", cfg.Host)
	assert.Equal(t, "token-b", cfg.BearerToken)

	// The context's cluster with the other user, as kubectl --user does.
	cfg, err = Connection{ConfigPaths: []string{p}, ConfigContextAuthInfo: "ub"}.RESTConfig()
	require.NoError(t, err)
	assert.Equal(t, "https://a:6443", cfg.Host)
	assert.Equal(t, "token-b", cfg.BearerToken)
	cfg, err = Connection{ConfigPaths: []string{p}, ConfigContextCluster: "b"}.RESTConfig()
	require.NoError(t, err)
	assert.Equal(t, "https://b:6443", cfg.Host)
	assert.Equal(t, "token-a", cfg.BearerToken)

	// Explicit values win over the file's.
	cfg, err = Connection{ConfigPaths: []string{p}, Host: "c.example:443", Token: "token-c", TLSServerName: "api.internal",
		ProxyURL: "http://127.0.0.1:3128", Insecure: true}.RESTConfig()
	require.NoError(t, err)
	assert.Equal(t, "https://c.example:443", cfg.Host)
	assert.Equal(t, "token-c", cfg.BearerToken)
	assert.Equal(t, "api.internal", cfg.ServerName)
	assert.True(t, cfg.Insecure)
	require.NotNil(t, cfg.Proxy)
}

func TestConnection_ConfigPathsMerged(t *testing.T) {
	dir := t.TempDir()
	first := filepath.Join(dir, "first")
	require.NoError(t, os.WriteFile(first, []byte(`apiVersion: v1
kind: Config
current-context: b
`), 0o600))
	second := kubeconfig(t, dir, "second", "https://a:6443", "https://b:6443")
	// The first file's current-context, the second file's contexts; a missing file is skipped.
	cfg, err := Connection{ConfigPaths: []string{first, filepath.Join(dir, "missing"), second}}.RESTConfig()
	require.NoError(t, err)
	assert.Equal(t, "https://b:6443", cfg.Host)

	_, err = Connection{ConfigPaths: []string{filepath.Join(dir, "missing")}}.RESTConfig()
	assert.ErrorContains(t, err, `load kubeconfig "`+filepath.Join(dir, "missing")+`"`)
}

func TestConnection_Exec(t *testing.T) {
	cfg, err := Connection{Host: "https://k:6443", ClusterCACertificate: "PEM", Exec: &ExecPlugin{
		APIVersion: "client.authentication.k8s.io/v1beta1", Command: "aws", Args: []string{"eks", "get-token"},
		Env: map[string]string{"B": "2", "A": "1"},
	}}.RESTConfig()
	require.NoError(t, err)
	require.NotNil(t, cfg.ExecProvider)
	assert.Equal(t, "aws", cfg.ExecProvider.Command)
	assert.Equal(t, []string{"eks", "get-token"}, cfg.ExecProvider.Args)
	assert.Equal(t, "A", cfg.ExecProvider.Env[0].Name, "env in a stable order")
	assert.Empty(t, cfg.BearerToken)
}

func TestConnection_HostNeedsCredentials(t *testing.T) {
	_, err := Connection{Host: "https://k:6443"}.RESTConfig()
	assert.ErrorContains(t, err, "has no credentials")
	_, err = Connection{Token: "t"}.RESTConfig()
	assert.ErrorContains(t, err, "needs host")
	cfg, err := Connection{Host: "10.0.0.2:6443", Token: "t", ClusterCACertificate: "PEM"}.RESTConfig()
	require.NoError(t, err)
	assert.Equal(t, "https://10.0.0.2:6443", cfg.Host)
}
