package provider

import (
	"context"
	"fmt"
	"math/big"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
)

// Plan-time refusal of bad input, tested twice from one table of cases: in process, where
// the diagnostic's attribute path is exact (Terraform's CLI shows a nested attribute's
// error at the resource's first line, hashicorp/terraform#33491), and through the real
// terraform CLI, which must print exactly one error, naming the attribute, and for a
// top-level attribute show its own line.

// badInput is one configuration that plan must refuse with exactly one error.
type badInput struct {
	name   string         // what is wrong, for failure messages
	config map[string]any // the resource's attributes (nested objects as maps, lists as []any)
	at     string         // attribute path of the error: "shards", `env["1BAD"]`, "tolerations[0].operator"
	detail string         // regexp the error's text must match; a space matches any line break
}

// testBadInputs runs every case against one resource type.
func testBadInputs(t *testing.T, typ string, cases []badInput) {
	t.Helper()
	t.Run("diagnostics", func(t *testing.T) {
		server, err := providerserver.NewProtocol6WithError(New(testVersion)())()
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		schemas, err := server.GetProviderSchema(ctx, &tfprotov6.GetProviderSchemaRequest{})
		if err != nil {
			t.Fatal(err)
		}
		objType := schemas.ResourceSchemas[typ].ValueType()
		for _, c := range cases {
			diags := validateConfig(t, server, typ, objType, c.config)
			var errs []*tfprotov6.Diagnostic
			for _, d := range diags {
				if d.Severity == tfprotov6.DiagnosticSeverityError {
					errs = append(errs, d)
				}
			}
			if len(errs) != 1 {
				t.Errorf("%s: want exactly one error at %s, got %d: %s", c.name, c.at, len(errs), describeDiags(errs))
				continue
			}
			if got := pathString(errs[0].Attribute); got != c.at {
				t.Errorf("%s: error at %q, want %q: %s", c.name, got, c.at, describeDiags(errs))
			}
			if !detailRE(c.detail).MatchString(errs[0].Summary + ": " + errs[0].Detail) {
				t.Errorf("%s: error %q does not match %q", c.name, errs[0].Summary+": "+errs[0].Detail, c.detail)
			}
		}
	})
	t.Run("terraform", func(t *testing.T) {
		var steps []resource.TestStep
		seen := map[int]bool{}
		for i, c := range cases {
			steps = append(steps, resource.TestStep{Config: hclResource(typ, fmt.Sprintf("case%d", i), c.config), PlanOnly: true})
		}
		check := func(err error) error {
			out := err.Error()
			m := regexp.MustCompile(`with ` + typ + `\.case(\d+),`).FindStringSubmatch(out)
			if m == nil {
				return fmt.Errorf("an error that names no case: %w", err)
			}
			i, _ := strconv.Atoi(m[1])
			c := cases[i]
			seen[i] = true
			if n := strings.Count(out, "Error: "); n != 1 {
				return fmt.Errorf("%s: want exactly one error, terraform printed %d:\n%s", c.name, n, out)
			}
			if !detailRE(c.detail).MatchString(out) {
				return fmt.Errorf("%s: want an error matching %q:\n%s", c.name, c.detail, out)
			}
			root := regexp.MustCompile(`^[a-z_]+`).FindString(c.at)
			if root == c.at { // a top-level attribute: Terraform shows its line
				if !regexp.MustCompile(`in resource "` + typ + `" "case\d+":\s+\d+:\s+` + root + ` = `).MatchString(out) {
					return fmt.Errorf("%s: terraform does not show the line of %s:\n%s", c.name, root, out)
				}
			}
			if !strings.Contains(out, c.at) {
				return fmt.Errorf("%s: the error does not name %s:\n%s", c.name, c.at, out)
			}
			return nil
		}
		resource.UnitTest(t, resource.TestCase{ProtoV6ProviderFactories: providerFactories, Steps: steps, ErrorCheck: check})
		for i, c := range cases {
			if !seen[i] {
				t.Errorf("%s: terraform plan accepted it", c.name)
			}
		}
	})
}

func validateConfig(t *testing.T, server tfprotov6.ProviderServer, typ string, objType tftypes.Type, config map[string]any) []*tfprotov6.Diagnostic {
	t.Helper()
	v, err := tfValue(objType, config)
	if err != nil {
		t.Fatalf("config %v: %v", config, err)
	}
	dv, err := tfprotov6.NewDynamicValue(objType, v)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := server.ValidateResourceConfig(context.Background(), &tfprotov6.ValidateResourceConfigRequest{TypeName: typ, Config: &dv})
	if err != nil {
		t.Fatal(err)
	}
	return resp.Diagnostics
}

func detailRE(s string) *regexp.Regexp {
	return regexp.MustCompile("(?s)" + strings.ReplaceAll(s, " ", `\s+`))
}

func describeDiags(ds []*tfprotov6.Diagnostic) string {
	var out []string
	for _, d := range ds {
		out = append(out, fmt.Sprintf("[%s] %s: %s", pathString(d.Attribute), d.Summary, d.Detail))
	}
	return strings.Join(out, "; ")
}

// pathString spells an attribute path as stack.FieldError does: a.b[0]["k"].
func pathString(p *tftypes.AttributePath) string {
	if p == nil {
		return ""
	}
	var b strings.Builder
	for _, s := range p.Steps() {
		switch s := s.(type) {
		case tftypes.AttributeName:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(string(s))
		case tftypes.ElementKeyString:
			fmt.Fprintf(&b, "[%q]", string(s))
		case tftypes.ElementKeyInt:
			fmt.Fprintf(&b, "[%d]", int64(s))
		}
	}
	return b.String()
}

// tfValue builds the value of type t from a Go value: nil is null, unknownValue{} unknown.
func tfValue(t tftypes.Type, v any) (tftypes.Value, error) {
	if v == nil {
		return tftypes.NewValue(t, nil), nil
	}
	if _, ok := v.(unknownValue); ok {
		return tftypes.NewValue(t, tftypes.UnknownValue), nil
	}
	switch tt := t.(type) {
	case tftypes.Object:
		m, ok := v.(map[string]any)
		if !ok {
			return tftypes.Value{}, fmt.Errorf("want an object, got %T", v)
		}
		attrs := map[string]tftypes.Value{}
		for name, at := range tt.AttributeTypes {
			av, err := tfValue(at, m[name])
			if err != nil {
				return av, fmt.Errorf("%s: %w", name, err)
			}
			attrs[name] = av
		}
		for name := range m {
			if _, ok := tt.AttributeTypes[name]; !ok {
				return tftypes.Value{}, fmt.Errorf("no attribute %q", name)
			}
		}
		return tftypes.NewValue(t, attrs), nil
	case tftypes.Map:
		m, ok := v.(map[string]any)
		if !ok {
			return tftypes.Value{}, fmt.Errorf("want a map, got %T", v)
		}
		elems := map[string]tftypes.Value{}
		for k, e := range m {
			ev, err := tfValue(tt.ElementType, e)
			if err != nil {
				return ev, err
			}
			elems[k] = ev
		}
		return tftypes.NewValue(t, elems), nil
	case tftypes.List, tftypes.Set:
		l, ok := v.([]any)
		if !ok {
			return tftypes.Value{}, fmt.Errorf("want a list, got %T", v)
		}
		var elemType tftypes.Type
		if lt, ok := t.(tftypes.List); ok {
			elemType = lt.ElementType
		} else {
			elemType = t.(tftypes.Set).ElementType
		}
		var elems []tftypes.Value
		for _, e := range l {
			ev, err := tfValue(elemType, e)
			if err != nil {
				return ev, err
			}
			elems = append(elems, ev)
		}
		return tftypes.NewValue(t, elems), nil
	}
	switch {
	case t.Is(tftypes.String):
		return tftypes.NewValue(t, v.(string)), nil
	case t.Is(tftypes.Bool):
		return tftypes.NewValue(t, v.(bool)), nil
	case t.Is(tftypes.Number):
		return tftypes.NewValue(t, new(big.Float).SetInt64(int64(v.(int)))), nil
	}
	return tftypes.Value{}, fmt.Errorf("unsupported type %s", t)
}

// hclResource writes a resource block, one top-level attribute per line.
func hclResource(typ, name string, config map[string]any) string {
	var b strings.Builder
	fmt.Fprintf(&b, "resource %q %q {\n", typ, name)
	for _, k := range sortedKeys(config) {
		fmt.Fprintf(&b, "  %s = %s\n", k, hclValue(config[k]))
	}
	b.WriteString("}\n")
	return b.String()
}

func hclValue(v any) string {
	switch v := v.(type) {
	case string:
		return strconv.Quote(v)
	case int:
		return strconv.Itoa(v)
	case bool:
		return strconv.FormatBool(v)
	case []any:
		parts := make([]string, len(v))
		for i, e := range v {
			parts[i] = hclValue(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case map[string]any:
		var parts []string
		for _, k := range sortedKeys(v) {
			parts = append(parts, strconv.Quote(k)+" = "+hclValue(v[k]))
		}
		return "{ " + strings.Join(parts, ", ") + " }"
	}
	panic(fmt.Sprintf("hclValue: %T", v))
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// with returns base plus the given attributes.
func with(base map[string]any, kv ...any) map[string]any {
	out := map[string]any{}
	for k, v := range base {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i].(string)] = kv[i+1]
	}
	return out
}
