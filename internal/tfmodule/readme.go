package tfmodule

import (
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/zclconf/go-cty/cty"
)

// The markers of a README's generated section; the text around them is written by hand.
const (
	BeginMarker = "<!-- BEGIN GENERATED: inputs and outputs, from variables.tf and outputs.tf by make generate; edit those, not this -->"
	EndMarker   = "<!-- END GENERATED -->"
)

// Render is the generated section of the module's README, markers included: a table of the
// inputs, the type of each that holds an object as written (its comments document its
// attributes), and a table of the outputs.
func Render(m *Module) string {
	var b strings.Builder
	b.WriteString(BeginMarker + "\n## Inputs\n\n")
	b.WriteString("| name | type | default | description |\n|---|---|---|---|\n")
	var detailed []Variable
	for _, v := range m.Variables {
		ty := "`" + typeexpr.TypeString(v.Type) + "`"
		if hasObject(v.Type) {
			ty = fmt.Sprintf("%s, [below](#%s)", kind(v.Type), anchor(v.Name))
			detailed = append(detailed, v)
		}
		if v.Sensitive {
			ty += ", sensitive"
		}
		def := "required"
		if !v.Required() {
			def = "`" + strings.Join(strings.Fields(v.DefaultSource), " ") + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", v.Name, ty, def, cell(v.Description))
	}
	for _, v := range detailed {
		fmt.Fprintf(&b, "\n### `%s`\n\n```hcl\n%s\n```\n", v.Name, v.TypeSource)
	}
	b.WriteString("\n## Outputs\n\n| name | description |\n|---|---|\n")
	for _, o := range m.Outputs {
		d := cell(o.Description)
		if o.Sensitive {
			d = strings.TrimSpace(d + " Sensitive.")
		}
		fmt.Fprintf(&b, "| `%s` | %s |\n", o.Name, d)
	}
	b.WriteString(EndMarker + "\n")
	return b.String()
}

// Splice puts section in place of the marked one of readme.
func Splice(readme, section string) (string, error) {
	begin := strings.Index(readme, BeginMarker)
	end := strings.Index(readme, EndMarker)
	if begin < 0 || end < begin {
		return "", fmt.Errorf("no generated section: put the lines %q and %q where the inputs and outputs go", BeginMarker, EndMarker)
	}
	end += len(EndMarker)
	if end < len(readme) && readme[end] == '\n' {
		end++
	}
	return readme[:begin] + section + readme[end:], nil
}

// hasObject reports whether ty is or holds an object type.
func hasObject(ty cty.Type) bool {
	switch {
	case ty.IsObjectType():
		return true
	case ty.IsMapType(), ty.IsListType(), ty.IsSetType():
		return hasObject(ty.ElementType())
	}
	return false
}

// kind names a type that holds objects in a few words: object, map of objects, ...
func kind(ty cty.Type) string {
	switch {
	case ty.IsMapType():
		return "map of " + kind(ty.ElementType()) + "s"
	case ty.IsListType(), ty.IsSetType():
		return "list of " + kind(ty.ElementType()) + "s"
	}
	return "object"
}

// anchor is GitHub's anchor of a "### `name`" heading.
func anchor(name string) string {
	return strings.ToLower(strings.ReplaceAll(name, " ", "-"))
}

// cell is text fit for one table cell.
func cell(s string) string {
	return strings.ReplaceAll(strings.Join(strings.Fields(s), " "), "|", `\|`)
}
