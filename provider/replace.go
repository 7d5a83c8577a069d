package provider

import (
	"context"
	"reflect"
	"sort"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
)

// replacingAttributes walks a schema for the attributes whose plan modifiers may require
// replacement (RequiresReplace and RequiresReplaceIf of every type), by path; below such an
// attribute nothing more is listed (its change replaces whatever changed inside).
func replacingAttributes(attrs map[string]schema.Attribute, prefix string) []string {
	var out []string
	for name, a := range attrs {
		p := prefix + name
		if replaces(a) {
			out = append(out, p)
			continue
		}
		if n, ok := a.(schema.SingleNestedAttribute); ok {
			out = append(out, replacingAttributes(n.Attributes, p+".")...)
		}
	}
	sort.Strings(out)
	return out
}

// replaces reports whether an attribute has a plan modifier that may require replacement:
// the framework's are the requiresReplace(If) modifiers of each type's planmodifier package.
func replaces(a schema.Attribute) bool {
	v := reflect.ValueOf(a)
	f := v.FieldByName("PlanModifiers")
	if !f.IsValid() {
		return false
	}
	for i := range f.Len() {
		if strings.Contains(strings.ToLower(reflect.TypeOf(f.Index(i).Interface()).String()), "requiresreplace") {
			return true
		}
	}
	return false
}

// dottedPath is the path of a dotted attribute name ("cce.worker_pool.name").
func dottedPath(dotted string) path.Path {
	parts := strings.Split(dotted, ".")
	p := path.Root(parts[0])
	for _, n := range parts[1:] {
		p = p.AtName(n)
	}
	return p
}

// changedReplacing names the attributes of names (replacingAttributes) whose planned value
// differs from the state's, as the framework's RequiresReplace compares them: what forces
// the replacement of a resource that both describe.
func changedReplacing(ctx context.Context, plan tfsdk.Plan, state tfsdk.State, names []string) []string {
	var out []string
	for _, n := range names {
		var planned, prior attr.Value
		if plan.GetAttribute(ctx, dottedPath(n), &planned).HasError() || state.GetAttribute(ctx, dottedPath(n), &prior).HasError() {
			continue
		}
		if !planned.Equal(prior) {
			out = append(out, n)
		}
	}
	return out
}
