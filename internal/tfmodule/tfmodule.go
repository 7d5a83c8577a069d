// Package tfmodule reads a Terraform module's variables, outputs and the arguments it sets
// from them, as its generated README and the tests that hold it to the provider need them.
package tfmodule

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// Module is the part of a module's configuration that this package reads: every *.tf file
// of one folder (not its sub-folders, which are other modules or tests).
type Module struct {
	Dir       string
	Variables []Variable // in the order of the files, then of the blocks
	Outputs   []Output
	blocks    []*hclsyntax.Block // every top-level block, in the same order
	src       map[string][]byte  // file name -> its bytes, for source text
}

// Variable is one `variable` block.
type Variable struct {
	Name        string
	Description string
	// Type is the type constraint (cty.DynamicPseudoType for `any` or none); Defaults are the
	// defaults of its optional object attributes, nil when it declares none.
	Type     cty.Type
	Defaults *typeexpr.Defaults
	// TypeSource is the type expression as written, comments included, indented from column 0.
	TypeSource string
	// Default is the default as written, before conversion to Type; DefaultSource its text.
	// Both are unset (cty.NilVal, "") for a required variable.
	Default       cty.Value
	DefaultSource string
	Sensitive     bool
	Nullable      bool
}

// Required reports whether a caller must set the variable.
func (v Variable) Required() bool { return v.Default == cty.NilVal }

// Output is one `output` block.
type Output struct {
	Name, Description string
	Sensitive         bool
}

// Load reads the *.tf files of dir.
func Load(dir string) (*Module, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.tf"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("module %q: no .tf files", dir)
	}
	slices.Sort(files)
	m := &Module{Dir: dir, src: map[string][]byte{}}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			return nil, err
		}
		f, diags := hclsyntax.ParseConfig(b, name, hcl.InitialPos)
		if diags.HasErrors() {
			return nil, fmt.Errorf("parse %q: %w", name, diags)
		}
		m.src[name] = b
		for _, blk := range f.Body.(*hclsyntax.Body).Blocks {
			m.blocks = append(m.blocks, blk)
			switch blk.Type {
			case "variable":
				v, err := m.variable(blk)
				if err != nil {
					return nil, err
				}
				m.Variables = append(m.Variables, v)
			case "output":
				o := Output{Name: label(blk)}
				if err := m.literal(blk, "description", &o.Description); err != nil {
					return nil, err
				}
				if err := m.literal(blk, "sensitive", &o.Sensitive); err != nil {
					return nil, err
				}
				m.Outputs = append(m.Outputs, o)
			}
		}
	}
	return m, nil
}

// Variable returns the variable of that name.
func (m *Module) Variable(name string) (Variable, bool) {
	i := slices.IndexFunc(m.Variables, func(v Variable) bool { return v.Name == name })
	if i < 0 {
		return Variable{}, false
	}
	return m.Variables[i], true
}

func label(b *hclsyntax.Block) string {
	if len(b.Labels) == 0 {
		return ""
	}
	return b.Labels[0]
}

func (m *Module) variable(blk *hclsyntax.Block) (Variable, error) {
	v := Variable{Name: label(blk), Type: cty.DynamicPseudoType, Nullable: true}
	where := fmt.Sprintf("variable %q (%s)", v.Name, blk.DefRange())
	if err := m.literal(blk, "description", &v.Description); err != nil {
		return v, err
	}
	if err := m.literal(blk, "sensitive", &v.Sensitive); err != nil {
		return v, err
	}
	if err := m.literal(blk, "nullable", &v.Nullable); err != nil {
		return v, err
	}
	if a, ok := blk.Body.Attributes["type"]; ok {
		ty, defaults, diags := typeexpr.TypeConstraintWithDefaults(a.Expr)
		if diags.HasErrors() {
			return v, fmt.Errorf("%s: type: %w", where, diags)
		}
		v.Type, v.Defaults, v.TypeSource = ty, defaults, m.source(a.Expr.Range())
	}
	if a, ok := blk.Body.Attributes["default"]; ok {
		val, diags := a.Expr.Value(nil)
		if diags.HasErrors() {
			return v, fmt.Errorf("%s: default: %w", where, diags)
		}
		v.Default, v.DefaultSource = val, m.source(a.Expr.Range())
	}
	return v, nil
}

// literal sets *into from the block's attribute name, a constant string or bool; an absent
// attribute leaves *into as it is.
func (m *Module) literal(blk *hclsyntax.Block, name string, into any) error {
	a, ok := blk.Body.Attributes[name]
	if !ok {
		return nil
	}
	val, diags := a.Expr.Value(nil)
	if diags.HasErrors() {
		return fmt.Errorf("%s: %s must be a constant: %w", blk.DefRange(), name, diags)
	}
	switch p := into.(type) {
	case *string:
		if val.Type() != cty.String || val.IsNull() {
			return fmt.Errorf("%s: %s must be a string", a.SrcRange, name)
		}
		*p = val.AsString()
	case *bool:
		if val.Type() != cty.Bool || val.IsNull() {
			return fmt.Errorf("%s: %s must be true or false", a.SrcRange, name)
		}
		*p = val.True()
	}
	return nil
}

// source is the text of r, its lines after the first indented as they would be at column 0.
func (m *Module) source(r hcl.Range) string {
	text := string(r.SliceBytes(m.src[r.Filename]))
	lines := strings.Split(text, "\n")
	// The first line starts at the expression; the last (a closing bracket) is indented as
	// the line the expression starts on, which the others are dedented by.
	indent := r.Start.Column - 1
	if len(lines) > 1 {
		last := lines[len(lines)-1]
		indent = len(last) - len(strings.TrimLeft(last, " "))
	}
	for i := 1; i < len(lines); i++ {
		lines[i] = strings.TrimPrefix(lines[i], strings.Repeat(" ", indent))
	}
	return strings.Join(lines, "\n")
}

// Attr is what one path into a variable holds.
type Attr struct {
	Type cty.Type
	// Default is what the module uses when the caller leaves it unset: the variable's default
	// as written, or an optional attribute's default; a null of Type when there is none.
	Default cty.Value
	// Defaults are those of its own optional attributes (nil: none).
	Defaults *typeexpr.Defaults
	// Optional: an object attribute the caller may leave out (a variable: one with a default).
	Optional bool
}

// At is the variable path's type and default: a variable's name, then object attribute
// names, or Element for the element of a map or list.
func (m *Module) At(path []string) (Attr, error) {
	v, ok := m.Variable(path[0])
	if !ok {
		return Attr{}, fmt.Errorf("module %q has no variable %q", m.Dir, path[0])
	}
	a := Attr{Type: v.Type, Default: v.Default, Defaults: v.Defaults, Optional: !v.Required()}
	if a.Default == cty.NilVal {
		a.Default = cty.NullVal(a.Type)
	}
	for i, step := range path[1:] {
		child := func(key string) *typeexpr.Defaults {
			if a.Defaults == nil {
				return nil
			}
			return a.Defaults.Children[key]
		}
		switch {
		case step == Element && (a.Type.IsMapType() || a.Type.IsListType() || a.Type.IsSetType()):
			a = Attr{Type: a.Type.ElementType(), Defaults: child("")}
			a.Default = cty.NullVal(a.Type)
		case a.Type.IsObjectType() && a.Type.HasAttribute(step):
			next := Attr{Type: a.Type.AttributeType(step), Defaults: child(step), Optional: a.Type.AttributeOptional(step)}
			next.Default = cty.NullVal(next.Type)
			if a.Defaults != nil {
				if d, ok := a.Defaults.DefaultValues[step]; ok {
					next.Default = d
				}
			}
			a = next
		default:
			return Attr{}, fmt.Errorf("var.%s has no %q", strings.Join(path[:i+1], "."), step)
		}
	}
	return a, nil
}
