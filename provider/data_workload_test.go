package provider

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
)

// Every data source has its resource's arguments naming the object and every attribute the
// resource computes (manifests aside), of the same type and sensitivity.
func TestDataSources_ExportWhatTheResourcesCompute(t *testing.T) {
	ctx := context.Background()
	for _, newDS := range (&ctrProvider{}).DataSources(ctx) {
		d := newDS().(*workloadDataSource)
		var ds datasource.SchemaResponse
		d.Schema(ctx, datasource.SchemaRequest{}, &ds)
		rs := d.resourceSchema(ctx)
		want := append(slices.Clone(dataSourceArguments), exported(rs)...)
		var got []string
		for name, a := range ds.Schema.Attributes {
			got = append(got, name)
			r := rs.Attributes[name]
			if r == nil {
				t.Errorf("%T: %s is not an attribute of the resource", d.resource, name)
				continue
			}
			sameText := a.GetMarkdownDescription() == r.GetMarkdownDescription() || slices.Contains(dataSourceArguments, name)
			if !a.GetType().Equal(r.GetType()) || a.IsSensitive() != r.IsSensitive() || !sameText {
				t.Errorf("%T: %s differs from the resource's: %v %v, want %v %v", d.resource, name, a.GetType(), a.IsSensitive(), r.GetType(), r.IsSensitive())
			}
			if slices.Contains(dataSourceArguments, name) != !a.IsComputed() {
				t.Errorf("%T: %s: computed %v", d.resource, name, a.IsComputed())
			}
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%T: attributes %v, want %v", d.resource, got, want)
		}
		// What other workspaces look these up for.
		musts := map[string][]string{"*provider.cubeResource": {"cube_conf", "transfer_url"}, "*provider.servingResource": {"url"},
			"*provider.trainingJobResource": {"donefile_url", "file_server_url"}}[fmt.Sprintf("%T", d.resource)]
		if len(musts) == 0 {
			t.Errorf("%T: no attribute named that it must export", d.resource)
		}
		for _, must := range musts {
			if ds.Schema.Attributes[must] == nil {
				t.Errorf("%T: %s is not exported", d.resource, must)
			}
		}
	}
}

// dataSourceSteps follow a resource's create: the data source of the same type reads the
// resource at addr back by its namespace and name and finds every exported attribute as the
// resource's state has it; then one naming an object that does not exist fails, named.
func dataSourceSteps(config, addr, ns string) []resource.TestStep {
	typ, _, _ := strings.Cut(addr, ".")
	read := config + fmt.Sprintf(`
data %[1]q "read" {
  namespace = %[2]s.namespace
  name      = %[2]s.name
}
`, typ, addr)
	missing := config + fmt.Sprintf(`
data %[1]q "missing" {
  namespace = %[2]q
  name      = "nothing-here"
}
`, typ, ns)
	return []resource.TestStep{
		{Config: read, Check: sameExports(addr, "data."+typ+".read")},
		{Config: missing, ExpectError: regexp.MustCompile(regexp.QuoteMeta(typ + " " + ns + "/nothing-here: none of its objects exist"))},
	}
}

// sameExports checks that the data source at data holds every exported attribute of the
// resource at addr, value for value (lists and maps element by element).
// movesOnItsOwn are a training job's exports that the job's own progress changes between
// two reads a second apart (the resource's refresh and the data source's read of one step):
// its phase and its last condition.
var movesOnItsOwn = []string{"phase", "last_condition"}

func sameExports(addr, data string) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		r, d := s.RootModule().Resources[addr], s.RootModule().Resources[data]
		if r == nil || d == nil {
			return fmt.Errorf("%s or %s is not in the state", addr, data)
		}
		ctx := context.Background()
		var names []string
		for _, newDS := range (&ctrProvider{}).DataSources(ctx) {
			ds := newDS().(*workloadDataSource)
			if strings.HasPrefix(data, "data."+ds.typeName(ctx, providerTypeName)+".") {
				names = slices.Concat(dataSourceArguments, exported(ds.resourceSchema(ctx)))
			}
		}
		if len(names) == 0 {
			return fmt.Errorf("no data source for %s", data)
		}
		for _, n := range movesOnItsOwn {
			if strings.HasPrefix(data, "data."+stack.TrainingJobType+".") && !slices.Contains(names, n) {
				return fmt.Errorf("movesOnItsOwn names %q, which %s does not export", n, data)
			}
		}
		compared := 0
		for key, want := range r.Primary.Attributes {
			top, _, _ := strings.Cut(key, ".")
			if !slices.Contains(names, top) || top == "kubernetes" || slices.Contains(movesOnItsOwn, top) {
				continue
			}
			if got, ok := d.Primary.Attributes[key]; !ok || got != want {
				return fmt.Errorf("%s: %s = %q (present %v), the resource has %q", data, key, got, ok, want)
			}
			compared++
		}
		if compared < 3 {
			return fmt.Errorf("%s: only %d attributes compared", data, compared)
		}
		return nil
	}
}
