package provider

import (
	"context"
	"reflect"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// readable reports whether a configuration or plan (raw) can be read into a model of type
// M: every value M holds in a Go struct, pointer, slice, map or plain Go value — not in an
// attr.Value, which can hold an unknown — is known (and null only where Go has nil). A nested object, a list element or a
// value inside them assigned from a value known only later (a variable or a conditional
// during validate, another resource's attribute during plan) cannot be read; validation
// skips such a configuration, the plan marks what depends on it unknown, and the values are
// judged once known. Derived from the model, so no nested block is left out.
func readable[M any](raw tftypes.Value) bool {
	return readableAs(raw, reflect.TypeFor[M]())
}

func readableAs(v tftypes.Value, t reflect.Type) bool {
	if t.Implements(attrValue) {
		return true
	}
	if !v.IsKnown() {
		return false
	}
	if v.IsNull() { // nil; a struct or a Go value cannot be null
		return t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map
	}
	switch t.Kind() {
	case reflect.Pointer:
		return readableAs(v, t.Elem())
	case reflect.Slice:
		var elems []tftypes.Value
		if err := v.As(&elems); err != nil {
			return false
		}
		for _, e := range elems {
			if !readableAs(e, t.Elem()) {
				return false
			}
		}
	case reflect.Map:
		var elems map[string]tftypes.Value
		if err := v.As(&elems); err != nil {
			return false
		}
		for _, e := range elems {
			if !readableAs(e, t.Elem()) {
				return false
			}
		}
	case reflect.Struct:
		var attrs map[string]tftypes.Value
		if err := v.As(&attrs); err != nil {
			return false
		}
		return readableFields(attrs, t)
	}
	return true
}

// readableFields walks the tfsdk fields of a struct type, and those of the structs it embeds
// (the workload attributes), whose attributes sit beside its own.
func readableFields(attrs map[string]tftypes.Value, t reflect.Type) bool {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("tfsdk")
		switch {
		case f.Anonymous && tag == "" && f.Type.Kind() == reflect.Struct:
			if !readableFields(attrs, f.Type) {
				return false
			}
		case tag != "" && tag != "-":
			if a, ok := attrs[tag]; ok && !readableAs(a, f.Type) {
				return false
			}
		}
	}
	return true
}

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
// reads is known, walking its tfsdk fields but skip: attribute values (and every element of a
// list or map value), nested struct pointers, slices and maps of them, and the workload
// attributes it embeds. Derived from the model and its schema, so no attribute is forgotten.
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
		return fullyKnown(v.Interface().(attr.Value))
	case v.Kind() == reflect.Slice:
		for i := range v.Len() {
			if !valueKnown(v.Index(i), skip) {
				return false
			}
		}
		return true
	case v.Kind() == reflect.Map:
		for it := v.MapRange(); it.Next(); {
			if !valueKnown(it.Value(), skip) {
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

// fullyKnown reports whether a value is known, and every element, attribute or map value
// inside it too.
func fullyKnown(v attr.Value) bool {
	if v.IsUnknown() || v.IsNull() {
		return !v.IsUnknown()
	}
	tv, err := v.ToTerraformValue(context.Background())
	return err == nil && tv.IsFullyKnown()
}
