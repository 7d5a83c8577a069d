package provider

import (
	"context"
	"os"
	"regexp"
	"slices"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/resource"
	rschema "github.com/hashicorp/terraform-plugin-framework/resource/schema"
)

// resourceSchemas are the provider's resource schemas by type name.
func resourceSchemas() map[string]rschema.Schema {
	ctx := context.Background()
	out := map[string]rschema.Schema{}
	for _, newResource := range (&ctrProvider{}).Resources(ctx) {
		r := newResource()
		var meta resource.MetadataResponse
		r.Metadata(ctx, resource.MetadataRequest{ProviderTypeName: providerTypeName}, &meta)
		var s resource.SchemaResponse
		r.Schema(ctx, resource.SchemaRequest{}, &s)
		out[meta.TypeName] = s.Schema
	}
	return out
}

// sensitivePaths are the paths (type.attr.nested) of every sensitive attribute of attrs.
func sensitivePaths(prefix string, attrs map[string]rschema.Attribute) []string {
	var out []string
	for name, a := range attrs {
		p := prefix + "." + name
		if a.IsSensitive() {
			out = append(out, p)
		}
		switch a := a.(type) {
		case rschema.SingleNestedAttribute:
			out = append(out, sensitivePaths(p, a.Attributes)...)
		case rschema.ListNestedAttribute:
			out = append(out, sensitivePaths(p, a.NestedObject.Attributes)...)
		case rschema.MapNestedAttribute:
			out = append(out, sensitivePaths(p, a.NestedObject.Attributes)...)
		}
	}
	return out
}

// The state guide's table (templates/guides/state.md.tmpl) names every sensitive attribute
// of every resource, and nothing else.
func TestStateGuide_NamesEverySensitiveAttribute(t *testing.T) {
	var want []string
	for typ, s := range resourceSchemas() {
		want = append(want, sensitivePaths(typ, s.Attributes)...)
	}
	b, err := os.ReadFile("../templates/guides/state.md.tmpl")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range regexp.MustCompile("(?m)^\\| `(ctr_[a-z_.]+)` \\|").FindAllStringSubmatch(string(b), -1) {
		got = append(got, m[1])
	}
	slices.Sort(want)
	slices.Sort(got)
	if len(want) < 10 || !slices.Equal(got, want) {
		t.Errorf("the guide's table names %v;\nthe sensitive attributes are %v", got, want)
	}
}
