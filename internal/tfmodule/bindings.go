package tfmodule

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// Element stands for "an element of" in a path: var.pods's elements are pods.*.
const Element = "*"

// Binding is an argument, or an attribute nested in one, that the module passes a variable
// (or an attribute of one) to as it is, possibly through a local, one branch of a conditional,
// an object it builds, or a function's argument: `shards = var.cube.shards` binds
// ctr_cube.shards to cube.shards.
type Binding struct {
	// Target is the argument's path: the resource type (or "module.NAME" for a module call)
	// and then the argument and nested attribute names.
	Target []string
	// Var is the variable's path: its name, then attribute names or Element.
	Var []string
}

func (b Binding) String() string {
	return strings.Join(b.Target, ".") + " <- var." + strings.Join(b.Var, ".")
}

// Arguments is what the module's resources and module calls set: the bindings, and every
// path it gives a value (bound or not: a name it builds, another resource's attribute).
type Arguments struct {
	Bindings []Binding
	Set      map[string]bool // "ctr_cube.storage", "ctr_cube.name", ...
}

// Arguments reads every resource and module block.
func (m *Module) Arguments() (Arguments, error) {
	args := Arguments{Set: map[string]bool{}}
	locals := map[string]hclsyntax.Expression{}
	for _, b := range m.blocks {
		if b.Type == "locals" {
			for name, a := range b.Body.Attributes {
				locals[name] = a.Expr
			}
		}
	}
	w := walker{locals: locals, args: &args}
	for _, b := range m.blocks {
		var root string
		switch {
		case b.Type == "resource" && len(b.Labels) == 2:
			root = b.Labels[0]
		case b.Type == "module" && len(b.Labels) == 1:
			root = "module." + b.Labels[0]
		default:
			continue
		}
		for name, a := range b.Body.Attributes {
			if slices.Contains([]string{"count", "for_each", "provider", "providers", "depends_on", "source", "version"}, name) {
				continue
			}
			if err := w.walk([]string{root, name}, a.Expr, 0); err != nil {
				return args, err
			}
		}
	}
	slices.SortFunc(args.Bindings, func(a, b Binding) int { return strings.Compare(a.String(), b.String()) })
	return args, nil
}

type walker struct {
	locals map[string]hclsyntax.Expression
	args   *Arguments
}

func (w walker) walk(target []string, e hclsyntax.Expression, depth int) error {
	if depth > 32 {
		return fmt.Errorf("%s: locals refer to each other in a loop", e.Range())
	}
	w.args.Set[strings.Join(target, ".")] = true
	switch e := e.(type) {
	case *hclsyntax.ScopeTraversalExpr:
		switch e.Traversal.RootName() {
		case "var":
			path, ok := traversalPath(e.Traversal[1:])
			if !ok {
				return nil
			}
			w.args.Bindings = append(w.args.Bindings, Binding{Target: slices.Clone(target), Var: path})
		case "local":
			if len(e.Traversal) < 2 {
				return nil
			}
			attr, ok := e.Traversal[1].(hcl.TraverseAttr)
			if x, found := w.locals[attr.Name]; ok && found && len(e.Traversal) == 2 {
				return w.walk(target, x, depth+1)
			}
		}
	case *hclsyntax.ConditionalExpr:
		if err := w.walk(target, e.TrueResult, depth); err != nil {
			return err
		}
		return w.walk(target, e.FalseResult, depth)
	case *hclsyntax.ObjectConsExpr:
		for _, item := range e.Items {
			key, diags := item.KeyExpr.Value(nil)
			if diags.HasErrors() || key.Type() != cty.String {
				continue
			}
			if err := w.walk(append(slices.Clone(target), key.AsString()), item.ValueExpr, depth); err != nil {
				return err
			}
		}
	case *hclsyntax.FunctionCallExpr:
		if e.Name == "lookup" && len(e.Args) >= 2 {
			// lookup(var.m, "key", default): an element of the map.
			if t, ok := e.Args[0].(*hclsyntax.ScopeTraversalExpr); ok && t.Traversal.RootName() == "var" {
				if path, ok := traversalPath(t.Traversal[1:]); ok {
					w.args.Bindings = append(w.args.Bindings, Binding{Target: slices.Clone(target), Var: append(path, Element)})
				}
			}
			return nil
		}
		// coalesce, merge, sensitive, ...: each argument is a value of the target's.
		for _, a := range e.Args {
			if err := w.walk(target, a, depth); err != nil {
				return err
			}
		}
	}
	return nil
}

// traversalPath is the attribute names (and string keys) of a traversal after its root.
func traversalPath(t hcl.Traversal) ([]string, bool) {
	var path []string
	for _, step := range t {
		switch s := step.(type) {
		case hcl.TraverseAttr:
			path = append(path, s.Name)
		case hcl.TraverseIndex:
			if s.Key.Type() != cty.String {
				return nil, false
			}
			path = append(path, s.Key.AsString())
		default:
			return nil, false
		}
	}
	return path, len(path) > 0
}
