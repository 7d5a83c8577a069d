package provider

import (
	"cmp"
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
	"github.com/elasticctr/terraform-provider-ctr/provider/internal/diagnostics"
)

// importByNamespaceName starts the import of a workload resource from "NAMESPACE/NAME": only
// id, namespace and name are set, and Read, seeing them alone, reads the rest from the
// cluster. An ID that names no valid object is refused here, before anything is read.
//
// An import by identity (Terraform 1.12+: import { identity = { namespace = ..., name = ... } })
// names the same object, the namespace defaulting as the resource's does.
func importByNamespaceName(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	id := req.ID
	if ident, ok := importedIdentity(ctx, req, &resp.Diagnostics); ok {
		id = cmp.Or(ident["namespace"], stack.DefaultNamespace) + "/" + ident["name"]
	}
	ns, name, err := parseNamespaceName(id)
	if err != nil {
		resp.Diagnostics.Append(diagnostics.InvalidImportID(id, "NAMESPACE/NAME, e.g. default/ctr-demo ("+err.Error()+")"))
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), id)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("namespace"), ns)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("name"), name)...)
}

// parseNamespaceName splits an import ID, and says what is wrong with one that names no object.
func parseNamespaceName(id string) (ns, name string, err error) {
	parts := strings.Split(id, "/")
	switch {
	case len(parts) != 2:
		return "", "", fmt.Errorf("%d parts separated by /", len(parts))
	case !stack.NamespacePattern.MatchString(parts[0]):
		return "", "", fmt.Errorf("the namespace %q %s", parts[0], stack.NamespaceRule)
	case !stack.NamePattern.MatchString(parts[1]):
		return "", "", fmt.Errorf("the name %q %s", parts[1], stack.NameRule)
	}
	return parts[0], parts[1], nil
}

// namespaceName is the ID of a workload resource.
func namespaceName(namespace, name string) types.String {
	return types.StringValue(namespace + "/" + name)
}
