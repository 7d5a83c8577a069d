package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
)

// How the provider reaches a cluster, as a platform engineer configures it: kubeconfig paths
// with ~ and several files, an exec credential plugin, explicit host and token; never an
// implicit kubeconfig; and credentials that change without changing any plan.

// connectionTest starts a test with none of the connection's environment variables set, so
// that only what the configuration says connects (TestMain's opt-in is undone).
func connectionTest(t *testing.T) (*kubeClients, string, string, *clientcmdapi.Config) {
	t.Helper()
	k := requireCluster(t)
	kc, err := clientcmd.LoadFromFile(os.Getenv("KUBECONFIG"))
	if err != nil {
		t.Fatal(err)
	}
	for _, env := range connectionEnv {
		t.Setenv(env, "")
	}
	return k, k.namespace(t), "srv-" + jobName()[3:], kc
}

// servingWith is servingConfig with a provider block (and the resource's own lines).
func servingWith(provider, ns, name, own string) string {
	return provider + "\n" + servingConfig(ns, name, "1", own)
}

// current is the kubeconfig's current cluster and credentials.
func current(t *testing.T, kc *clientcmdapi.Config) (*clientcmdapi.Cluster, *clientcmdapi.AuthInfo) {
	t.Helper()
	ctx := kc.Contexts[kc.CurrentContext]
	if ctx == nil || kc.Clusters[ctx.Cluster] == nil || kc.AuthInfos[ctx.AuthInfo] == nil {
		t.Fatalf("the control plane's kubeconfig has no complete current context")
	}
	return kc.Clusters[ctx.Cluster], kc.AuthInfos[ctx.AuthInfo]
}

// homeWithKubeconfig points HOME at a fresh folder whose ~/.kube/config is the control
// plane's kubeconfig (KUBECONFIG).
func homeWithKubeconfig(t *testing.T) {
	t.Helper()
	home := t.TempDir()
	t.Setenv("HOME", home)
	data, err := os.ReadFile(os.Getenv("KUBECONFIG"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(home, ".kube"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".kube", "config"), data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestAccConnection_HomeKubeconfig: `config_path = "~/.kube/config"` on the provider is the
// home directory's kubeconfig.
func TestAccConnection_HomeKubeconfig(t *testing.T) {
	k, ns, name, _ := connectionTest(t)
	homeWithKubeconfig(t)
	k.run(t, ns, stack.ServingType, name, resource.TestStep{
		Config: servingWith(`provider "ctr" {
  kubernetes = { config_path = "~/.kube/config" }
}`, ns, name, ""),
		Check: k.deploymentAvailable(ns, name, 1),
	})
}

// TestAccConnection_ConfigPaths: a resource's own connection with several kubeconfigs, merged
// as kubectl merges KUBECONFIG: the first (under ~) names the context, the last holds it, a
// missing one in between is skipped. Refresh and destroy use it as stored.
func TestAccConnection_ConfigPaths(t *testing.T) {
	k, ns, name, kc := connectionTest(t)
	home := t.TempDir()
	t.Setenv("HOME", home)
	if err := os.WriteFile(filepath.Join(home, "first.yaml"), []byte("apiVersion: v1\nkind: Config\ncurrent-context: "+kc.CurrentContext+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	own := fmt.Sprintf("  kubernetes = { config_paths = [\"~/first.yaml\", %q, %q] }", filepath.Join(home, "missing.yaml"), os.Getenv("KUBECONFIG"))
	k.run(t, ns, stack.ServingType, name,
		resource.TestStep{
			Config: servingWith(`provider "ctr" {}`, ns, name, own),
			Check:  k.deploymentAvailable(ns, name, 1),
		},
		resource.TestStep{
			Config: servingWith(`provider "ctr" {}`, ns, name, own+"\n  replicas = 2"),
			Check:  k.deploymentAvailable(ns, name, 2),
		},
	)
}

// TestAccConnection_NoneIsAnError: with no connection anywhere, plan fails and says what to
// set, although KUBECONFIG and ~/.kube/config would both reach a cluster.
func TestAccConnection_NoneIsAnError(t *testing.T) {
	_, ns, name, _ := connectionTest(t)
	homeWithKubeconfig(t)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories,
		Steps: []resource.TestStep{{
			Config:      servingWith(`provider "ctr" {}`, ns, name, ""),
			PlanOnly:    true,
			ExpectError: detailRE(`No Kubernetes Connection .* never falls back to KUBECONFIG or ~/.kube/config .* provider "ctr" \{ kubernetes = \{ config_path = "~/.kube/config" \} \} .* KUBE_CONFIG_PATH`),
		}},
	})
}

// TestAccConnection_TokenRotation: the provider's token is replaced by another one and the
// first is revoked: the plan is empty (refresh used the new token), nothing of either token
// is in state, and destroy (checked by the harness) works with the new one. Moving the
// kubeconfig plans nothing either.
func TestAccConnection_TokenRotation(t *testing.T) {
	k, ns, name, kc := connectionTest(t)
	tokens, revoke := k.serviceAccountTokens(t, ns, 2)
	cluster, _ := current(t, kc)
	withToken := func(token string) string {
		return fmt.Sprintf(`provider "ctr" {
  kubernetes = {
    host                   = %q
    cluster_ca_certificate = %q
    token                  = %q
  }
}`, cluster.Server, string(cluster.CertificateAuthorityData), token)
	}
	moved := filepath.Join(t.TempDir(), "moved", "kubeconfig")
	k.run(t, ns, stack.ServingType, name,
		resource.TestStep{
			Config:            servingWith(withToken(tokens[0]), ns, name, ""),
			Check:             k.deploymentAvailable(ns, name, 1),
			ConfigStateChecks: []statecheck.StateCheck{stateHolds(tokens...)},
		},
		resource.TestStep{
			PreConfig: revoke[0],
			Config:    servingWith(withToken(tokens[1]), ns, name, ""),
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectEmptyPlan(),
			}},
			ConfigStateChecks: []statecheck.StateCheck{stateHolds(tokens...)},
		},
		resource.TestStep{
			PreConfig: func() { copyFile(t, os.Getenv("KUBECONFIG"), moved) },
			Config: servingWith(fmt.Sprintf(`provider "ctr" {
  kubernetes = { config_path = %q }
}`, moved), ns, name, ""),
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectEmptyPlan(),
			}},
		},
	)
}

// TestAccConnection_ExecPlugin: an exec credential plugin (a script that prints an
// ExecCredential with a ServiceAccount token and counts its runs) authenticates the
// provider's connection; the token is nowhere in state.
func TestAccConnection_ExecPlugin(t *testing.T) { testExecPlugin(t, false) }

// TestAccConnection_ExecPluginOwn: the same plugin as a resource's own connection, which is
// stored in state (the command, not the token) and used as stored at refresh and destroy.
func TestAccConnection_ExecPluginOwn(t *testing.T) { testExecPlugin(t, true) }

func testExecPlugin(t *testing.T, resourceLevel bool) {
	k, ns, name, kc := connectionTest(t)
	tokens, _ := k.serviceAccountTokens(t, ns, 1)
	cluster, _ := current(t, kc)
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	cred, err := json.Marshal(map[string]any{
		"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
		"status": map[string]any{"token": tokens[0]},
	})
	if err != nil {
		t.Fatal(err)
	}
	plugin := filepath.Join(dir, "credential-plugin")
	script := "#!/bin/sh\n# a tiny client-go credential plugin\necho run >> \"$RUNS_FILE\"\ncat <<'EOF'\n" + string(cred) + "\nEOF\n"
	if err := os.WriteFile(plugin, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	conn := fmt.Sprintf(`{
    host                   = %q
    cluster_ca_certificate = %q
    exec = {
      api_version = "client.authentication.k8s.io/v1"
      command     = %q
      env         = { RUNS_FILE = %q }
    }
  }`, cluster.Server, string(cluster.CertificateAuthorityData), plugin, runs)
	ran := func(*terraform.State) error {
		data, err := os.ReadFile(runs)
		if err != nil || strings.Count(string(data), "run") == 0 {
			return fmt.Errorf("the exec plugin never ran (%v)", err)
		}
		return os.Remove(runs)
	}
	provider := "provider \"ctr\" {\n  kubernetes = " + conn + "\n}"
	own := ""
	if resourceLevel {
		provider, own = `provider "ctr" {}`, "  kubernetes = "+conn
	}
	k.run(t, ns, stack.ServingType, name,
		resource.TestStep{
			Config:            servingWith(provider, ns, name, own),
			Check:             resource.ComposeTestCheckFunc(k.deploymentAvailable(ns, name, 1), ran),
			ConfigStateChecks: []statecheck.StateCheck{stateHolds(tokens...)},
		},
		resource.TestStep{
			// client-go keeps the plugin's token while it is valid: within this process the
			// plugin need not run again (each terraform run is a new process, which does).
			Config:            servingWith(provider, ns, name, own+"\n  replicas = 2"),
			Check:             k.deploymentAvailable(ns, name, 2),
			ConfigStateChecks: []statecheck.StateCheck{stateHolds(tokens...)},
		},
	)
}

// TestAccConnection_ProviderExecAndTokenRefused: exec and a static token together are
// refused at plan time, as the kubernetes provider's docs warn they are undefined together.
func TestAccConnection_ProviderExecAndTokenRefused(t *testing.T) {
	resource.UnitTest(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories,
		Steps: []resource.TestStep{{
			Config: servingWith(`provider "ctr" {
  kubernetes = {
    host  = "https://127.0.0.1:1"
    token = "t"
    exec  = { api_version = "client.authentication.k8s.io/v1", command = "aws" }
  }
}`, "default", "exec-and-token", ""),
			PlanOnly:    true,
			ExpectError: detailRE(`"kubernetes.token" cannot be specified when "kubernetes.exec" is specified`),
		}},
	})
}

// stateHolds fails when any of the secrets appears anywhere in the resources' state.
func stateHolds(secrets ...string) statecheck.StateCheck {
	return stateCheckFunc(func(raw string) error {
		for i, s := range secrets {
			if strings.Contains(raw, s) {
				return fmt.Errorf("secret %d is stored in state", i)
			}
		}
		return nil
	})
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// stateCheckFunc runs f on the whole state as JSON (sensitive values included).
type stateCheckFunc func(raw string) error

func (f stateCheckFunc) CheckState(_ context.Context, req statecheck.CheckStateRequest, resp *statecheck.CheckStateResponse) {
	data, err := json.Marshal(req.State)
	if err != nil {
		resp.Error = err
		return
	}
	resp.Error = f(string(data))
}

// TestOwnCredentials_JudgedOnceKnown: a static credential of a resource's own connection
// that no plan could judge (known only at apply) is refused at apply, at its attribute, with
// the validator's words; unset or still unknown ones are not.
func TestOwnCredentials_JudgedOnceKnown(t *testing.T) {
	t.Parallel()
	conn := func(token types.String) types.Object {
		attrs := map[string]attr.Value{}
		for name, typ := range connectionAttrTypes {
			v, err := typ.ValueFromTerraform(context.Background(), tftypes.NewValue(typ.TerraformType(context.Background()), nil))
			if err != nil {
				t.Fatal(err)
			}
			attrs[name] = v
		}
		attrs["config_path"], attrs["token"] = types.StringValue("/kubeconfig"), token
		return types.ObjectValueMust(connectionAttrTypes, attrs)
	}
	diags := ownCredentials(conn(types.StringValue("t")))
	if len(diags) != 1 || !diags[0].(diag.DiagnosticWithPath).Path().Equal(path.Root("kubernetes").AtName("token")) ||
		!strings.Contains(diags[0].Detail(), "static credential here would be stale") {
		t.Errorf("a known token: %v", diags)
	}
	for _, token := range []types.String{types.StringNull(), types.StringUnknown()} {
		if diags := ownCredentials(conn(token)); diags.HasError() {
			t.Errorf("token %v: %v", token, diags)
		}
	}
	if diags := ownCredentials(types.ObjectNull(connectionAttrTypes)); diags.HasError() {
		t.Errorf("no connection of its own: %v", diags)
	}
}

// TestProviderConnection_HalfACertificate: the provider's client certificate goes with its
// key wherever each comes from: the configuration or the KUBE_* variables that fill it. Half
// of one is refused, at the half that is there, saying what to add; the halves from the two
// places together are accepted. Not parallel: it sets the environment.
func TestProviderConnection_HalfACertificate(t *testing.T) {
	r := newBadInputRun(t, "provider")
	conn := func(kv ...any) map[string]any {
		return map[string]any{"kubernetes": with(map[string]any{"host": "https://k:6443"}, kv...)}
	}
	t.Setenv("KUBE_TOKEN", "")
	t.Setenv("KUBE_CLIENT_KEY_DATA", "KEY")
	if errs, _ := r.errors("provider", conn("client_certificate", "PEM")); len(errs) > 0 {
		t.Errorf("the certificate configured, its key from KUBE_CLIENT_KEY_DATA: %s", describeDiags(errs))
	}
	t.Setenv("KUBE_CLIENT_KEY_DATA", "")
	t.Setenv("KUBE_CLIENT_CERT_DATA", "PEM")
	errs, later := r.errors("provider", conn())
	if len(errs) != 1 || !later || pathString(errs[0].Attribute) != "kubernetes.client_certificate" ||
		!strings.Contains(errs[0].Detail, "a client certificate authenticates only with its private key: set client_key (or KUBE_CLIENT_KEY_DATA) too") {
		t.Errorf("a certificate from KUBE_CLIENT_CERT_DATA alone: %s", describeDiags(errs))
	}
}
