package provider

import (
	"reflect"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// unknownAttrs reports whether any of the named top-level attributes of a configuration or
// plan is unknown as a whole — a nested object assigned from a value known only after
// apply (a module variable during validate, another resource's attribute). Such objects
// cannot be read into the Go structs of the models; validation skips them and the plan
// marks what depends on them unknown.
func unknownAttrs(raw tftypes.Value, names ...string) bool {
	if !raw.IsKnown() {
		return true
	}
	var attrs map[string]tftypes.Value
	if err := raw.As(&attrs); err != nil {
		return false
	}
	for _, n := range names {
		if v, ok := attrs[n]; ok && !v.IsKnown() {
			return true
		}
	}
	return false
}

// nestedObjects are the attributes a model reads into struct pointers or slices (its tfsdk
// fields of those kinds), which cannot hold an unknown value: derived from the model, so a new
// nested block is never left out.
func nestedObjects(model any) []string {
	var out []string
	t := reflect.TypeOf(model)
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("tfsdk")
		if tag == "" || tag == "-" {
			continue
		}
		if k := f.Type.Kind(); k == reflect.Pointer || k == reflect.Slice {
			out = append(out, tag)
		}
	}
	return out
}

// clusterObjects are ctr_cluster's nested objects (the workloads' are their workload's nested).
var clusterObjects = nestedObjects(clusterModel{})

// notRendered are the inputs rendering does not read: the connection, how long and how far to
// wait, whether to adopt existing objects, and the secrets generated when unset, the training job's upload token and the cube's
// control token (a placeholder stands in for each at plan time).
var notRendered = []string{"kubernetes", "timeouts", "wait", "upload_token", "control_token", "adopt"}

// rendererSkips are a schema's attributes rendering does not read: notRendered, and every
// attribute only the provider sets (computed, not optional), which a plan holds unknown.
func rendererSkips(s schema.Schema) map[string]bool {
	skip := map[string]bool{}
	for _, n := range notRendered {
		skip[n] = true
	}
	for name, a := range s.Attributes {
		if a.IsComputed() && !a.IsOptional() {
			skip[name] = true
		}
	}
	return skip
}

// modelKnown reports whether every value of a model (a pointer to its struct) that rendering
// reads is known, walking its tfsdk fields but skip: attribute values, nested struct pointers
// and slices of them, and the workload attributes it embeds. Derived from the model and its
// schema, so no attribute is forgotten.
func modelKnown(model any, skip map[string]bool) bool {
	// The shared attributes are an embedded struct of an unexported type, whose fields
	// reflection may not read through the model: they are walked through attrs().
	if w, ok := model.(interface{ attrs() *workloadAttrs }); ok && !valueKnown(reflect.ValueOf(w.attrs()), skip) {
		return false
	}
	return valueKnown(reflect.ValueOf(model), skip)
}

var attrValue = reflect.TypeOf((*attr.Value)(nil)).Elem()

func valueKnown(v reflect.Value, skip map[string]bool) bool {
	switch {
	case v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface:
		return v.IsNil() || valueKnown(v.Elem(), skip)
	case v.Type().Implements(attrValue):
		return !v.Interface().(attr.Value).IsUnknown()
	case v.Kind() == reflect.Slice:
		for i := range v.Len() {
			if !valueKnown(v.Index(i), skip) {
				return false
			}
		}
		return true
	case v.Kind() == reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("tfsdk")
			if !f.IsExported() || tag == "" || tag == "-" || skip[tag] {
				continue
			}
			if !valueKnown(v.Field(i), skip) {
				return false
			}
		}
	}
	return true
}
