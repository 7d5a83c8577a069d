package tfmodule

import (
	"flag"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"
)

var update = flag.Bool("update", false, "rewrite testdata/mod/README.want.md")

func load(t *testing.T) *Module {
	t.Helper()
	m, err := Load("testdata/mod")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestLoadVariables(t *testing.T) {
	m := load(t)
	var names []string
	for _, v := range m.Variables {
		names = append(names, v.Name)
	}
	if want := []string{"name", "zone", "cube", "pods", "token"}; !slices.Equal(names, want) {
		t.Fatalf("variables %v, want %v (file order)", names, want)
	}
	zone, _ := m.Variable("zone")
	if !zone.Required() {
		t.Error("zone has no default: it is required")
	}
	token, _ := m.Variable("token")
	if token.Required() || !token.Sensitive || !token.Default.IsNull() {
		t.Errorf("token: required %v, sensitive %v, default %#v; want optional, sensitive, null", token.Required(), token.Sensitive, token.Default)
	}
	cube, _ := m.Variable("cube")
	if want := "object({\n  shards = optional(number, 2) # how many\n  spread = optional(object({\n    key = optional(string, \"kubernetes.io/hostname\")\n  }))\n})"; cube.TypeSource != want {
		t.Errorf("cube's type source:\n%s\nwant (dedented, comments kept):\n%s", cube.TypeSource, want)
	}
	if cube.DefaultSource != "{}" {
		t.Errorf("cube's default source %q, want {} as written", cube.DefaultSource)
	}
}

func TestAt(t *testing.T) {
	m := load(t)
	for _, tc := range []struct {
		path     []string
		ty       cty.Type
		def      cty.Value
		optional bool
	}{
		{[]string{"name"}, cty.String, cty.StringVal("x"), true},
		{[]string{"zone"}, cty.String, cty.NullVal(cty.String), false},
		{[]string{"cube", "shards"}, cty.Number, cty.NumberIntVal(2), true},
		{[]string{"cube", "spread", "key"}, cty.String, cty.StringVal("kubernetes.io/hostname"), true},
		{[]string{"pods", Element, "read_only"}, cty.Bool, cty.False, true},
		{[]string{"pods", Element, "labels"}, cty.Map(cty.String), cty.NullVal(cty.Map(cty.String)), true},
	} {
		a, err := m.At(tc.path)
		if err != nil {
			t.Errorf("%v: %v", tc.path, err)
			continue
		}
		if !a.Type.Equals(tc.ty) || !a.Default.RawEquals(tc.def) || a.Optional != tc.optional {
			t.Errorf("%v: type %#v default %#v optional %v; want %#v %#v %v", tc.path, a.Type, a.Default, a.Optional, tc.ty, tc.def, tc.optional)
		}
	}
	if _, err := m.At([]string{"cube", "replicas"}); err == nil || !strings.Contains(err.Error(), `var.cube has no "replicas"`) {
		t.Errorf("a path the type does not have: %v", err)
	}
}

func TestArguments(t *testing.T) {
	args, err := load(t).Arguments()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, b := range args.Bindings {
		got = append(got, b.String())
	}
	want := []string{
		"ctr_cube.pod <- var.pods.*",                          // lookup: an element
		"ctr_cube.shards <- var.cube.shards",                  // through a local and a conditional
		"ctr_cube.spread.topology_key <- var.cube.spread.key", // an object built attribute by attribute
		"ctr_cube.token <- var.token",
		"ctr_cube.zone <- var.zone", // a function's argument
		"module.inner.cube <- var.cube",
	}
	if !slices.Equal(got, want) {
		t.Errorf("bindings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, p := range []string{"ctr_cube.name", "ctr_cube.spread", "ctr_cube.spread.required"} {
		if !args.Set[p] {
			t.Errorf("%s is set (not from a variable as it is), but not in Set", p)
		}
	}
	if args.Set["ctr_cube.count"] {
		t.Error("count is a meta-argument, not one of the resource's")
	}
}

func TestREADME(t *testing.T) {
	m := load(t)
	old, err := os.ReadFile("testdata/mod/README.md")
	if err != nil {
		t.Fatal(err)
	}
	got, err := Splice(string(old), Render(m))
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile("testdata/mod/README.want.md", []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile("testdata/mod/README.want.md")
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("README:\n%s\nwant (go test -update rewrites it; review the diff):\n%s", got, want)
	}
	again, err := Splice(got, Render(m))
	if err != nil || again != got {
		t.Errorf("a second generation changed the README (%v)", err)
	}
	if _, err := Splice("# no markers\n", Render(m)); err == nil || !strings.Contains(err.Error(), BeginMarker) {
		t.Errorf("a README without the markers: %v, want an error naming them", err)
	}
}
