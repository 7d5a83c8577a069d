package provider

import (
	"context"
	"fmt"
	"maps"
	"math/big"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
)

// Plan-time refusal of bad input, tested twice from one table of cases per type: in process,
// where the diagnostic's attribute path is exact (Terraform's CLI shows a nested attribute's
// error at the resource's first line, hashicorp/terraform#33491), and through the real
// terraform CLI, which must print exactly one error per case, naming the attribute, and for a
// top-level attribute show its own line. TestBadInputs_EveryValidatorHasARow ties the tables
// to the schemas and to internal/stack's checks.

// badInput is one configuration that plan must refuse with exactly one error.
type badInput struct {
	name   string         // what is wrong, for failure messages
	config map[string]any // the attributes (nested objects as maps, lists as []any)
	at     string         // attribute path of the error: "shards", `env["1BAD"]`, "tolerations[0].operator"
	detail string         // regexp the error's text must match; a space matches any line break
}

// badInputs are the tables of bad values, by type: "provider", a resource type, or
// "data.<type>" for a data source. TestBadInputs runs them.
var badInputs = map[string][]func() []badInput{
	"provider":      {providerBadInputs},
	"ctr_cluster":   {clusterBadInputs, families("ctr_cluster")},
	"ctr_cube":      {cubeBadInputs, cubePodBadInputs, families("ctr_cube", "pod", "security_context")},
	"ctr_namespace": {namespaceBadInputs, families("ctr_namespace")},
	"ctr_queue":     {queueBadInputs, families("ctr_queue")},
	"ctr_serving":   {servingBadInputs, servingPodBadInputs, families("ctr_serving", "pod", "security_context")},
	"ctr_training_job": {trainingJobBadInputs, trainingJobPodBadInputs, trainingJobTaskBadInputs, recipeBadInputs,
		families("ctr_training_job", "pod", "security_context", "file_server.pod", "file_server.security_context")},
	"data.ctr_cube":         {dataSourceBadInputs("data.ctr_cube")},
	"data.ctr_serving":      {dataSourceBadInputs("data.ctr_serving")},
	"data.ctr_training_job": {dataSourceBadInputs("data.ctr_training_job")},
}

// families are the shared rows of a resource type (commonBadInputs) and of its pod blocks
// and security contexts at the given paths.
func families(typ string, at ...string) func() []badInput {
	return func() []badInput {
		base := validConfigs[typ]
		rows := commonBadInputs(typ, base)
		for _, a := range at {
			if strings.HasSuffix(a, "pod") {
				rows = append(rows, podBadInputs(base, a)...)
			} else {
				rows = append(rows, securityContextBadInputs(base, a)...)
			}
		}
		return rows
	}
}

// TestBadInputs: every bad value of every table is refused at plan time, once, at its
// attribute, saying what is allowed; in process and through the CLI. No cluster needed.
func TestBadInputs(t *testing.T) {
	t.Parallel()
	for _, typ := range slices.Sorted(maps.Keys(badInputs)) {
		t.Run(typ, func(t *testing.T) {
			t.Parallel()
			var rows []badInput
			for _, table := range badInputs[typ] {
				rows = append(rows, table()...)
			}
			testBadInputs(t, typ, rows)
		})
	}
}

// badInputRun runs configurations of one type in process, against a provider configured
// with validConfigs' (a plan needs one).
type badInputRun struct {
	t       *testing.T
	typ     string
	server  tfprotov6.ProviderServer
	schemas *tfprotov6.GetProviderSchemaResponse
}

func newBadInputRun(t *testing.T, typ string) *badInputRun {
	t.Helper()
	ctx := context.Background()
	server, err := providerserver.NewProtocol6WithError(New(testVersion)())()
	if err != nil {
		t.Fatal(err)
	}
	schemas, err := server.GetProviderSchema(ctx, &tfprotov6.GetProviderSchemaRequest{})
	if err != nil {
		t.Fatal(err)
	}
	r := &badInputRun{t: t, typ: typ, server: server, schemas: schemas}
	if typ != "provider" {
		if errs, _ := r.errors("provider", validConfigs["provider"]); len(errs) > 0 {
			t.Fatalf("configure the provider: %s", describeDiags(errs))
		}
	}
	return r
}

func (r *badInputRun) schema(typ string) *tfprotov6.Schema {
	switch {
	case typ == "provider":
		return r.schemas.Provider
	case strings.HasPrefix(typ, "data."):
		return r.schemas.DataSourceSchemas[strings.TrimPrefix(typ, "data.")]
	}
	return r.schemas.ResourceSchemas[typ]
}

// errors are the errors of a configuration: its validation's, and when it has none, the
// provider's configure or a resource's plan of a create (a data source is read only where
// there is a cluster); later says they are the latter.
func (r *badInputRun) errors(typ string, config map[string]any) (errs []*tfprotov6.Diagnostic, later bool) {
	t, ctx := r.t, context.Background()
	t.Helper()
	s := r.schema(typ)
	if s == nil {
		t.Fatalf("no type %s", typ)
	}
	v, err := tfValue(s.ValueType(), config)
	if err != nil {
		t.Fatalf("config %v: %v", config, err)
	}
	dv, err := tfprotov6.NewDynamicValue(s.ValueType(), v)
	if err != nil {
		t.Fatal(err)
	}
	var diags []*tfprotov6.Diagnostic
	switch name := strings.TrimPrefix(typ, "data."); {
	case typ == "provider":
		resp, err := r.server.ValidateProviderConfig(ctx, &tfprotov6.ValidateProviderConfigRequest{Config: &dv})
		if err != nil {
			t.Fatal(err)
		}
		if diags = resp.Diagnostics; len(errorsOf(diags)) == 0 {
			resp, err := r.server.ConfigureProvider(ctx, &tfprotov6.ConfigureProviderRequest{Config: &dv})
			if err != nil {
				t.Fatal(err)
			}
			diags, later = resp.Diagnostics, true
		}
	case name != typ:
		resp, err := r.server.ValidateDataResourceConfig(ctx, &tfprotov6.ValidateDataResourceConfigRequest{TypeName: name, Config: &dv})
		if err != nil {
			t.Fatal(err)
		}
		diags = resp.Diagnostics
	default:
		resp, err := r.server.ValidateResourceConfig(ctx, &tfprotov6.ValidateResourceConfigRequest{TypeName: typ, Config: &dv})
		if err != nil {
			t.Fatal(err)
		}
		if diags = resp.Diagnostics; len(errorsOf(diags)) == 0 {
			prior, err := tfprotov6.NewDynamicValue(s.ValueType(), tftypes.NewValue(s.ValueType(), nil))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := r.server.PlanResourceChange(ctx, &tfprotov6.PlanResourceChangeRequest{TypeName: typ, PriorState: &prior, ProposedNewState: &dv, Config: &dv})
			if err != nil {
				t.Fatal(err)
			}
			diags, later = resp.Diagnostics, true
		}
	}
	return errorsOf(diags), later
}

// allowedWords are what an error says when it says what is allowed.
var allowedWords = regexp.MustCompile(`(?i)\b(must|use|one of|between|at least|at most|needs?|choose|set|only|remove|give|put|leave|without|keep|instead|either|such as|cannot|allowed|end|annotate|drop)\b|e\.g\.`)

// testBadInputs runs every case of one type.
func testBadInputs(t *testing.T, typ string, cases []badInput) {
	t.Helper()
	atPlan := map[int]bool{} // refused by a plan, not by validation: the CLI gets there only when all validate
	t.Run("diagnostics", func(t *testing.T) {
		r := newBadInputRun(t, typ)
		for i, c := range cases {
			errs, later := r.errors(typ, c.config)
			atPlan[i] = later
			if len(errs) != 1 {
				t.Errorf("%s: want exactly one error at %s, got %d: %s", c.name, c.at, len(errs), describeDiags(errs))
				continue
			}
			if got := pathString(errs[0].Attribute); got != c.at {
				t.Errorf("%s: error at %q, want %q: %s", c.name, got, c.at, describeDiags(errs))
			}
			text := errs[0].Summary + ": " + errs[0].Detail
			if !detailRE(c.detail).MatchString(text) {
				t.Errorf("%s: error %q does not match %q", c.name, text, c.detail)
			}
			if !allowedWords.MatchString(errs[0].Detail) {
				t.Errorf("%s: error %q does not say what is allowed", c.name, text)
			}
		}
	})
	t.Run("terraform", func(t *testing.T) {
		var now, later []int
		for i := range cases {
			if atPlan[i] {
				later = append(later, i)
			} else {
				now = append(now, i)
			}
		}
		for _, batch := range [][]int{now, later} {
			if len(batch) > 0 {
				terraformBadInputs(t, typ, cases, batch)
			}
		}
	})
}

// terraformBadInputs plans the cases of batch together, each in a block of its own named
// case<i>, and checks that terraform prints exactly one error for each, as the table says.
func terraformBadInputs(t *testing.T, typ string, cases []badInput, batch []int) {
	t.Helper()
	var config strings.Builder
	kind, name := "resource", typ
	if strings.HasPrefix(typ, "data.") {
		kind, name = "data", strings.TrimPrefix(typ, "data.")
	}
	for _, i := range batch {
		label := fmt.Sprintf("case%d", i)
		if typ == "provider" {
			// A configuration of its own, which a resource uses (an unused one is not validated).
			config.WriteString(hclBlock("provider", []string{"ctr"}, with(cases[i].config, "alias", label)))
			fmt.Fprintf(&config, "resource \"ctr_namespace\" %q {\n  provider = ctr.%s\n  name     = \"ns\"\n}\n", label, label)
			continue
		}
		config.WriteString(hclBlock(kind, []string{name, label}, cases[i].config))
	}
	var out string
	resource.UnitTest(t, resource.TestCase{ProtoV6ProviderFactories: providerFactories,
		Steps:      []resource.TestStep{{Config: config.String(), PlanOnly: true}},
		ErrorCheck: func(err error) error { out = err.Error(); return nil }})
	addr := regexp.QuoteMeta(strings.TrimPrefix(typ, "resource.")) + `\.case(\d+)`
	if typ == "provider" {
		addr = `provider\["[^"]+"\]\.case(\d+)`
	}
	errs := map[int][]string{}
	for _, block := range strings.Split(out, "Error: ")[1:] {
		m := regexp.MustCompile(`with ` + addr + `,`).FindStringSubmatch(block)
		if m == nil {
			t.Errorf("an error that names no case:\n%s", block)
			continue
		}
		i, _ := strconv.Atoi(m[1])
		errs[i] = append(errs[i], block)
	}
	for _, i := range batch {
		c := cases[i]
		switch blocks := errs[i]; {
		case len(blocks) == 0:
			t.Errorf("%s: terraform accepted it", c.name)
		case len(blocks) > 1:
			t.Errorf("%s: want exactly one error, terraform printed %d:\n%s", c.name, len(blocks), strings.Join(blocks, "\n"))
		case !detailRE(c.detail).MatchString(blocks[0]):
			t.Errorf("%s: want an error matching %q:\n%s", c.name, c.detail, blocks[0])
		case !strings.Contains(blocks[0], c.at):
			t.Errorf("%s: the error does not name %s:\n%s", c.name, c.at, blocks[0])
		default:
			root := regexp.MustCompile(`^[a-z_]+`).FindString(c.at)
			in := fmt.Sprintf(`in %s "%s" "case%d":`, kind, name, i)
			if typ == "provider" {
				in = `in provider "ctr":`
			}
			if _, set := c.config[root]; set && root == c.at && !regexp.MustCompile(regexp.QuoteMeta(in)+`\s+\d+:\s+`+root+` +=`).MatchString(blocks[0]) {
				t.Errorf("%s: terraform does not show the line of %s:\n%s", c.name, root, blocks[0])
			}
		}
	}
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
	return hclBlock("resource", []string{typ, name}, config)
}

// hclBlock writes a block of a kind ("resource", "data", "provider") with its labels, one
// top-level attribute per line.
func hclBlock(kind string, labels []string, config map[string]any) string {
	var b strings.Builder
	b.WriteString(kind)
	for _, l := range labels {
		fmt.Fprintf(&b, " %q", l)
	}
	b.WriteString(" {\n")
	for _, k := range sortedKeys(config) {
		fmt.Fprintf(&b, "  %s = %s\n", k, hclValue(config[k]))
	}
	b.WriteString("}\n")
	return b.String()
}

func hclValue(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
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
