package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-log/tflog"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/elasticctr/terraform-provider-ctr/internal/kube"
	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
	"github.com/elasticctr/terraform-provider-ctr/provider/internal/diagnostics"
)

// namedKind is a cluster-scoped object a resource creates and owns by its name alone
// (ctr_namespace, ctr_queue): what their Delete and ImportState share.
type namedKind struct {
	title   string // in diagnostic summaries: "Namespace"
	noun    string // in sentences: "namespace"
	plural  string // "namespaces"
	idName  string // what an import ID is: "a namespace name"
	example string // an import ID: "ctr-ads"
	created func(*unstructured.Unstructured) bool
}

// deleteIfCreated deletes live, named name, as set, and waits until it is gone, unless it
// no longer carries ctr's owner label: then it is left, with a warning.
func (k namedKind) deleteIfCreated(ctx context.Context, kc *kube.Client, set stack.Set, live *unstructured.Unstructured, name string, diags *diag.Diagnostics) {
	if !k.created(live) {
		diags.Append(diagnostics.Warning(k.title+" Left in Place", sentence(k.noun)+" "+name+" no longer carries ctr's owner label, "+
			"so it is not deleted: ctr deletes only "+k.plural+" it created", ""))
		return
	}
	tflog.Info(ctx, "deleting "+k.noun+" "+name+" and waiting until it is gone")
	if err := kc.DeleteSet(ctx, set); err != nil {
		diags.Append(diagnostics.Failed("Delete "+k.title+" Error", "Could not delete "+k.noun+" "+name, "", err))
	}
}

// importByName sets id and name from the import ID or (Terraform 1.12+) the identity's
// name, and reports whether it was a valid name.
func (k namedKind) importByName(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) bool {
	id := req.ID
	if ident, ok := importedIdentity(ctx, req, &resp.Diagnostics); ok {
		id = ident["name"]
	}
	if !stack.NamespacePattern.MatchString(id) {
		resp.Diagnostics.Append(diagnostics.InvalidImportID(id, k.idName+", e.g. "+k.example+" (it "+stack.NamespaceRule+")"))
		return false
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), id)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("name"), id)...)
	return true
}

// sentence capitalises a noun's first letter.
func sentence(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}
