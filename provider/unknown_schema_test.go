package provider

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// validConfigs are configurations that validate and plan without an error, one per resource
// and data source type, and the provider's: what TestSchemas_EveryValueMayBeUnknown sets one
// value of at a time. A new type without one fails the test.
var validConfigs = map[string]map[string]any{
	"provider":         {"kubernetes": map[string]any{"host": unreachableHost, "token": "plan-only"}},
	"ctr_cluster":      {"kubernetes": map[string]any{"config_path": "/kubeconfig"}},
	"ctr_cube":         {"name": "c", "donefile_url": "http://f/base.txt"},
	"ctr_namespace":    {"name": "ns"},
	"ctr_queue":        {"name": "q"},
	"ctr_serving":      {"name": "s", "cube_conf": `[{"dict_name":"d","shard":1}]`},
	"ctr_training_job": {"name": "j"},
	"data.ctr_cube":    {"namespace": "default", "name": "c"},
	"data.ctr_serving": {"namespace": "default", "name": "s"},
	"data.ctr_training_job": {
		"namespace": "default", "name": "j"},
}

// unknownValue stands for a value known only later in the configurations of tfValue.
type unknownValue struct{}

// TestSchemas_EveryValueMayBeUnknown: every attribute of every schema — the provider's, each
// resource's and each data source's — at every depth (an attribute of a nested object, a list
// element, a map value, and so on down) may be unknown when Terraform validates (variables
// and conditionals are unknown then) and when it plans (another resource's attributes are).
// An unknown value is never refused for being unknown: the errors with it are among those
// the same configuration has with the value null (missing siblings of a value deep in a
// nested object are refused alike), and never a conversion error of the provider. Derived
// from the schemas: a new attribute is covered without a line here.
func TestSchemas_EveryValueMayBeUnknown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	server, err := providerserver.NewProtocol6WithError(New(testVersion)())()
	if err != nil {
		t.Fatal(err)
	}
	schemas, err := server.GetProviderSchema(ctx, &tfprotov6.GetProviderSchemaRequest{})
	if err != nil {
		t.Fatal(err)
	}
	call := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	var paths atomic.Int64
	// run checks a schema's every path with one kind of request: run returns its diagnostics,
	// and for a plan the planned manifests (Value{} where there are none).
	run := func(t *testing.T, what string, s *tfprotov6.Schema, base map[string]any, run func(config tftypes.Value) ([]*tfprotov6.Diagnostic, tftypes.Value)) {
		typ := s.ValueType()
		value := func(p attrPath, v any) tftypes.Value {
			tv, err := tfValue(typ, p.set(base, v))
			if err != nil {
				t.Fatalf("%s with %s: %v", what, p, err)
			}
			return tv
		}
		if ds, _ := run(value(nil, base)); len(errorsOf(ds)) > 0 {
			t.Fatalf("%s of validConfigs' configuration: %s", what, describeDiags(ds))
		}
		for _, p := range schemaPaths(s.Block.Attributes) {
			paths.Add(1)
			ds, manifests := run(value(p, unknownValue{}))
			// A plan that rendered manifests from a value it does not know would show objects
			// the apply does not make.
			if manifests.Type() != nil && manifests.IsKnown() && !slices.Contains(notRendered, p[0].(string)) && len(errorsOf(ds)) == 0 {
				t.Errorf("%s with %s unknown: manifests rendered known", what, p)
			}
			if len(errorsOf(ds)) == 0 {
				continue
			}
			null, _ := run(value(p, nil))
			for _, d := range errorsOf(ds) {
				if strings.Contains(d.Detail, "always an error in the provider") || !slices.ContainsFunc(errorsOf(null), sameDiagnostic(d)) {
					t.Errorf("%s with %s unknown: %s (with it null: %s)", what, p, describeDiags([]*tfprotov6.Diagnostic{d}), describeDiags(errorsOf(null)))
				}
			}
		}
	}
	dynamic := func(s *tfprotov6.Schema, v tftypes.Value) *tfprotov6.DynamicValue {
		dv, err := tfprotov6.NewDynamicValue(s.ValueType(), v)
		call(err)
		return &dv
	}
	none := tftypes.Value{}

	// The provider first: its configuration is what the resources' plans run with.
	configure := func(v tftypes.Value) ([]*tfprotov6.Diagnostic, tftypes.Value) {
		resp, err := server.ConfigureProvider(ctx, &tfprotov6.ConfigureProviderRequest{Config: dynamic(schemas.Provider, v)})
		call(err)
		return resp.Diagnostics, none
	}
	run(t, "provider validate", schemas.Provider, validConfigs["provider"], func(v tftypes.Value) ([]*tfprotov6.Diagnostic, tftypes.Value) {
		resp, err := server.ValidateProviderConfig(ctx, &tfprotov6.ValidateProviderConfigRequest{Config: dynamic(schemas.Provider, v)})
		call(err)
		return resp.Diagnostics, none
	})
	run(t, "provider configure", schemas.Provider, validConfigs["provider"], configure)
	if ds, _ := configure(must1(tfValue(schemas.Provider.ValueType(), validConfigs["provider"]))); len(errorsOf(ds)) > 0 {
		t.Fatalf("configure the provider: %s", describeDiags(ds))
	}

	for typ, s := range schemas.ResourceSchemas {
		t.Run(typ, func(t *testing.T) {
			t.Parallel()
			base, ok := validConfigs[typ]
			if !ok {
				t.Fatalf("no configuration in validConfigs")
			}
			run(t, typ+" validate", s, base, func(v tftypes.Value) ([]*tfprotov6.Diagnostic, tftypes.Value) {
				resp, err := server.ValidateResourceConfig(ctx, &tfprotov6.ValidateResourceConfigRequest{TypeName: typ, Config: dynamic(s, v)})
				call(err)
				return resp.Diagnostics, none
			})
			prior := dynamic(s, tftypes.NewValue(s.ValueType(), nil))
			run(t, typ+" plan", s, base, func(v tftypes.Value) ([]*tfprotov6.Diagnostic, tftypes.Value) {
				resp, err := server.PlanResourceChange(ctx, &tfprotov6.PlanResourceChangeRequest{TypeName: typ, PriorState: prior,
					ProposedNewState: dynamic(s, v), Config: dynamic(s, v)})
				call(err)
				if resp.PlannedState == nil {
					return resp.Diagnostics, none
				}
				planned, err := resp.PlannedState.Unmarshal(s.ValueType())
				call(err)
				var attrs map[string]tftypes.Value
				call(planned.As(&attrs))
				return resp.Diagnostics, attrs["manifests"]
			})
		})
	}
	for typ, s := range schemas.DataSourceSchemas {
		t.Run("data."+typ, func(t *testing.T) {
			t.Parallel()
			base, ok := validConfigs["data."+typ]
			if !ok {
				t.Fatalf("no configuration in validConfigs")
			}
			run(t, "data "+typ+" validate", s, base, func(v tftypes.Value) ([]*tfprotov6.Diagnostic, tftypes.Value) {
				resp, err := server.ValidateDataResourceConfig(ctx, &tfprotov6.ValidateDataResourceConfigRequest{TypeName: typ, Config: dynamic(s, v)})
				call(err)
				return resp.Diagnostics, none
			})
		})
	}
	t.Cleanup(func() {
		if n := paths.Load(); n < 300 {
			t.Errorf("only %d attribute paths: the schema walk misses nested attributes", n)
		}
	})
}

func must1[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func errorsOf(ds []*tfprotov6.Diagnostic) []*tfprotov6.Diagnostic {
	var out []*tfprotov6.Diagnostic
	for _, d := range ds {
		if d.Severity == tfprotov6.DiagnosticSeverityError {
			out = append(out, d)
		}
	}
	return out
}

func sameDiagnostic(d *tfprotov6.Diagnostic) func(*tfprotov6.Diagnostic) bool {
	return func(o *tfprotov6.Diagnostic) bool {
		return o.Summary == d.Summary && pathString(o.Attribute) == pathString(d.Attribute)
	}
}

// attrPath is a path into a configuration: attribute names (string), the first element of
// a list or set (int 0) and the value of key "k" of a map (mapKey).
type attrPath []any

type mapKey string

func (p attrPath) String() string {
	var b strings.Builder
	for _, s := range p {
		switch s := s.(type) {
		case string:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(s)
		case int:
			fmt.Fprintf(&b, "[%d]", s)
		case mapKey:
			fmt.Fprintf(&b, "[%q]", string(s))
		}
	}
	return b.String()
}

// set returns a copy of config with v at p, the objects, lists and maps on the way made
// where config has none.
func (p attrPath) set(config map[string]any, v any) map[string]any {
	return setAt(config, p, v).(map[string]any)
}

func setAt(cur any, p attrPath, v any) any {
	if len(p) == 0 {
		return v
	}
	switch s := p[0].(type) {
	case string:
		obj := map[string]any{}
		if m, ok := cur.(map[string]any); ok {
			for k, e := range m {
				obj[k] = e
			}
		}
		obj[s] = setAt(obj[s], p[1:], v)
		return obj
	case int:
		var first any
		if l, ok := cur.([]any); ok && len(l) > 0 {
			first = l[0]
		}
		return []any{setAt(first, p[1:], v)}
	case mapKey:
		var e any
		if m, ok := cur.(map[string]any); ok {
			e = m[string(s)]
		}
		return map[string]any{string(s): setAt(e, p[1:], v)}
	}
	panic(fmt.Sprintf("attrPath step %T", p[0]))
}

// schemaPaths are the paths of every value a configuration may set: each attribute that is
// not only computed, and inside it each nested attribute, list or set element and map value.
func schemaPaths(attrs []*tfprotov6.SchemaAttribute) []attrPath {
	var out []attrPath
	for _, a := range attrs {
		if a.Computed && !a.Optional && !a.Required {
			continue
		}
		p := attrPath{a.Name}
		out = append(out, p)
		if n := a.NestedType; n != nil {
			var elem attrPath
			switch n.Nesting {
			case tfprotov6.SchemaObjectNestingModeSingle:
				elem = p
			case tfprotov6.SchemaObjectNestingModeList, tfprotov6.SchemaObjectNestingModeSet:
				elem = append(slices.Clone(p), 0)
				out = append(out, elem)
			case tfprotov6.SchemaObjectNestingModeMap:
				elem = append(slices.Clone(p), mapKey("k"))
				out = append(out, elem)
			}
			for _, inner := range schemaPaths(n.Attributes) {
				out = append(out, append(slices.Clone(elem), inner...))
			}
			continue
		}
		out = append(out, typePaths(p, a.Type)...)
	}
	return out
}

// typePaths are the paths inside a value of a collection or object type (not the value's own).
func typePaths(p attrPath, t tftypes.Type) []attrPath {
	var out []attrPath
	switch t := t.(type) {
	case tftypes.List:
		e := append(slices.Clone(p), 0)
		out = append(append(out, e), typePaths(e, t.ElementType)...)
	case tftypes.Set:
		e := append(slices.Clone(p), 0)
		out = append(append(out, e), typePaths(e, t.ElementType)...)
	case tftypes.Map:
		e := append(slices.Clone(p), mapKey("k"))
		out = append(append(out, e), typePaths(e, t.ElementType)...)
	case tftypes.Object:
		for name, at := range t.AttributeTypes {
			e := append(slices.Clone(p), name)
			out = append(append(out, e), typePaths(e, at)...)
		}
	}
	return out
}
