package provider

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// Every example and module, planned with each of its values known only later. Terraform
// validates a configuration with every variable unknown (a module's too), and plans with
// values of resources not yet created unknown; a value may be null only through a
// conditional. So the test copies examples/ and adds, beside each ctr_* resource and data
// block, copies of it in which the values at one depth of its attributes (1: the attribute,
// 2: an attribute of a nested object or a list element, ...) come
//
//   - var:   from a variable whose default is the value (unknown at validate),
//   - cond:  through `var.ctr_on ? <value> : null` (unknown at validate; any value, not only
//     constants),
//   - later: from a terraform_data's output (unknown at plan too, as another resource's
//     attribute is),
//
// and runs `terraform validate` and `terraform plan` (no cluster: plans render without one)
// of every root through the real CLI with the provider built from this checkout. Derived
// from the files: a new example, resource or attribute is covered without a line here.
// A provider "ctr" block cannot be copied: its values that hold no other are fed through the
// conditional in place. Module calls are left as they are: Terraform validates a module with
// its variables unknown whatever the caller passes, and the module's own blocks get their
// copies.

// unknownForms are the ways a copy feeds a value; see above.
var unknownForms = []string{"var", "cond", "later"}

// exampleVariables are the values plan takes for the root variables that have no default
// (validate needs none). A new one without a value here fails the test, naming it.
var exampleVariables = map[string]string{
	"cce_endpoint":         unreachableHost,
	"volcano_manifest_url": unreachableHost + "/volcano.yaml",
	"vpc_id":               "vpc-example",
	"subnet_id":            "sbn-example",
	"admin_password":       "Example-Passw0rd",
}

func TestExamples_ValuesKnownOnlyLater(t *testing.T) {
	tf := terraformCLI(t)
	rc := devOverrides(t)
	copied := filepath.Join(t.TempDir(), "examples")
	if d := os.Getenv("CTR_EXAMPLES_COPY"); d != "" {
		copied = d // kept, to look at
	}
	roots, counts := rewriteExamples(t, filepath.Join("..", "examples"), copied)
	for _, f := range unknownForms {
		if counts[f] == 0 {
			t.Fatalf("no %s copy was made: the rewriting finds no values", f)
		}
	}
	t.Logf("copies with values known only later: %v, in %d roots", counts, len(roots))
	for _, root := range roots {
		t.Run(root.rel, func(t *testing.T) {
			t.Parallel()
			run := func(args ...string) ([]byte, error) {
				cmd := exec.Command(tf, args...)
				cmd.Dir, cmd.Env = root.dir, exampleEnv(rc, root.required)
				return cmd.CombinedOutput()
			}
			if len(root.others) > 0 {
				// Another provider (hashicorp/aws, ...): validated where it can be installed; its
				// plan would need that cloud's credentials.
				if out, err := run("init", "-backend=false", "-input=false", "-no-color"); err != nil {
					t.Skipf("needs %v, which cannot be installed here (scripts/validate-examples.sh skips it alike):\n%s", root.others, tail(out))
				}
			} else if out, err := run("get", "-no-color"); err != nil {
				t.Fatalf("terraform get: %v\n%s", err, out)
			}
			out, err := run("validate", "-json", "-no-color")
			var v struct {
				Valid       bool `json:"valid"`
				Diagnostics []struct {
					Severity string `json:"severity"`
					Summary  string `json:"summary"`
					Detail   string `json:"detail"`
					Snippet  *struct {
						Context string `json:"context"`
						Line    int    `json:"start_line"`
					} `json:"snippet"`
				} `json:"diagnostics"`
			}
			if jerr := json.Unmarshal(out, &v); jerr != nil {
				t.Fatalf("terraform validate: %v, %v\n%s", err, jerr, out)
			}
			for _, d := range v.Diagnostics {
				if d.Severity == "error" {
					at := ""
					if d.Snippet != nil {
						at = fmt.Sprintf(" of %s (line %d)", d.Snippet.Context, d.Snippet.Line)
					}
					t.Errorf("terraform validate%s: %s: %s", at, d.Summary, strings.Join(strings.Fields(d.Detail), " "))
				}
			}
			if !v.Valid || t.Failed() {
				t.Fatalf("terraform validate refused the copies (in %s; CTR_EXAMPLES_COPY=<dir> keeps them)", unknownFile)
			}
			if len(root.others) > 0 {
				return
			}
			for _, name := range root.required {
				if _, ok := exampleVariables[name]; !ok {
					t.Fatalf("variable %q has no default: give it a value in exampleVariables", name)
				}
			}
			if out, err := run("plan", "-input=false", "-lock=false", "-refresh=false", "-no-color"); err != nil {
				t.Fatalf("terraform plan: %v\n%s", err, planErrors(out))
			}
		})
	}
}

// unknownFile is the file of the copies in each directory.
const unknownFile = "ctr_unknown.tf"

// exampleRoot is a directory Terraform runs in: every example directory but the modules that
// take provider aliases, which only their callers can configure.
type exampleRoot struct {
	rel, dir string
	required []string // its variables without a default
	others   []string // providers other than ctr it needs
}

// rewriteExamples copies the tree src to dst, adding to every directory the copies of its
// ctr_* blocks, and returns the roots and how many copies each form made.
func rewriteExamples(t *testing.T, src, dst string) ([]exampleRoot, map[string]int) {
	t.Helper()
	counts := map[string]int{}
	var roots []exampleRoot
	dirs := map[string][]string{}
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Join(dst, filepath.Dir(rel)), 0o755); err != nil {
			return err
		}
		if strings.HasSuffix(p, ".tf") {
			dirs[filepath.Dir(rel)] = append(dirs[filepath.Dir(rel)], rel)
			return nil // written by the rewriting
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range slices.Sorted(maps.Keys(dirs)) {
		r := newUnknownRewriter()
		root := exampleRoot{rel: dir, dir: filepath.Join(dst, dir)}
		aliases := false
		for _, rel := range dirs[dir] {
			b, err := os.ReadFile(filepath.Join(src, rel))
			if err != nil {
				t.Fatal(err)
			}
			out, info, err := r.file(b, rel)
			if err != nil {
				t.Fatal(err)
			}
			root.required = append(root.required, info.required...)
			root.others = append(root.others, info.others...)
			aliases = aliases || info.aliases
			if err := os.WriteFile(filepath.Join(dst, rel), out, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(root.dir, unknownFile), r.declarations(), 0o644); err != nil {
			t.Fatal(err)
		}
		for f, n := range r.counts {
			counts[f] += n
		}
		if !aliases {
			roots = append(roots, root)
		}
	}
	return roots, counts
}

// unknownRewriter rewrites the files of one directory; declarations are what its copies use.
type unknownRewriter struct {
	vars   []string // defaults of var.ctr_v<i>, HCL source
	later  []string // values of terraform_data.ctr_later.output.l<i>
	defer_ bool     // a data block waits for terraform_data.ctr_defer
	copies []string // the copied blocks
	counts map[string]int
}

func newUnknownRewriter() *unknownRewriter { return &unknownRewriter{counts: map[string]int{}} }

// fileInfo is what a file tells about its directory.
type fileInfo struct {
	required []string
	others   []string
	aliases  bool
}

// metaArguments are Terraform's own arguments of a block, which must stay known.
var metaArguments = map[string]bool{"count": true, "for_each": true, "provider": true, "depends_on": true, "alias": true}

// file returns src with each ctr_* data block waiting for ctr_defer (a data source reads the
// cluster at plan once its configuration is known; after a resource that is yet to be created
// it reads at apply), and keeps the copies of its ctr_* blocks for declarations.
func (r *unknownRewriter) file(src []byte, name string) ([]byte, fileInfo, error) {
	var info fileInfo
	f, diags := hclsyntax.ParseConfig(src, name, hcl.InitialPos)
	if diags.HasErrors() {
		return nil, info, diags
	}
	body := f.Body.(*hclsyntax.Body)
	var edits []textEdit
	for _, b := range body.Blocks {
		switch {
		case b.Type == "variable" && len(b.Labels) == 1:
			if _, ok := b.Body.Attributes["default"]; !ok {
				info.required = append(info.required, b.Labels[0])
			}
		case b.Type == "terraform":
			for _, rp := range b.Body.Blocks {
				if rp.Type != "required_providers" {
					continue
				}
				for name, a := range rp.Body.Attributes {
					if name != "ctr" {
						info.others = append(info.others, name)
					}
					info.aliases = info.aliases || bytes.Contains(a.Expr.Range().SliceBytes(src), []byte("configuration_aliases"))
				}
			}
		case (b.Type == "resource" || b.Type == "data") && len(b.Labels) == 2 && strings.HasPrefix(b.Labels[0], "ctr_"):
			var wait []textEdit
			if b.Type == "data" {
				if _, ok := b.Body.Attributes["depends_on"]; ok {
					return nil, info, fmt.Errorf("%s: data %q %q has a depends_on of its own", name, b.Labels[0], b.Labels[1])
				}
				r.defer_ = true
				at := b.OpenBraceRange.End.Byte
				wait = []textEdit{{at: at, end: at, text: "\n  depends_on = [terraform_data.ctr_defer]\n"}}
				edits = append(edits, wait...)
			}
			r.block(src, b, wait)
		case b.Type == "provider" && len(b.Labels) == 1 && b.Labels[0] == "ctr":
			// A provider configuration cannot be copied: its values are fed in place, through
			// the conditional, every value that holds no other.
			for _, n := range blockNodes(b) {
				if n.leaf {
					edits = append(edits, textEdit{at: n.start, end: n.end, text: r.feed("cond", n, src)})
				}
			}
		}
	}
	return applyEdits(src, edits), info, nil
}

// block makes b's copies: per form and depth, one with that depth's values fed in that form.
func (r *unknownRewriter) block(src []byte, b *hclsyntax.Block, extra []textEdit) {
	nodes := blockNodes(b)
	depths := 0
	for _, n := range nodes {
		depths = max(depths, n.depth)
	}
	start, end := b.Range().Start.Byte, b.Range().End.Byte
	for _, form := range unknownForms {
		for d := 1; d <= depths; d++ {
			edits := slices.Clone(extra)
			for _, n := range nodes {
				if n.depth == d {
					if text := r.feed(form, n, src); text != "" {
						edits = append(edits, textEdit{at: n.start, end: n.end, text: text})
					}
				}
			}
			if len(edits) == len(extra) {
				continue
			}
			label := b.LabelRanges[1]
			edits = append(edits, textEdit{at: label.Start.Byte, end: label.End.Byte, text: fmt.Sprintf("%q", fmt.Sprintf("%s_%s%d", b.Labels[1], form, d))})
			for i := range edits {
				edits[i].at, edits[i].end = edits[i].at-start, edits[i].end-start
			}
			r.copies = append(r.copies, string(applyEdits(src[start:end], edits)))
			r.counts[form]++
		}
	}
}

// feed is the expression that feeds n's value in a form; "" where the form cannot (var and
// later take constants only: a default or an input that referred to the block would be a
// cycle).
func (r *unknownRewriter) feed(form string, n valueNode, src []byte) string {
	text := string(src[n.start:n.end])
	switch form {
	case "cond":
		return "(var.ctr_on ? " + text + "\n  : null)" // a heredoc must end its line
	case "var":
		if n.constant {
			r.vars = append(r.vars, text)
			return fmt.Sprintf("var.ctr_v%d", len(r.vars))
		}
	case "later":
		if n.constant {
			r.later = append(r.later, text)
			return fmt.Sprintf("terraform_data.ctr_later.output.l%d", len(r.later))
		}
	}
	return ""
}

// declarations is the directory's file of copies and what they use.
func (r *unknownRewriter) declarations() []byte {
	var b strings.Builder
	b.WriteString("# The copies of TestExamples_ValuesKnownOnlyLater, fed values known only later.\n\n")
	b.WriteString("variable \"ctr_on\" {\n  type    = bool\n  default = true\n}\n\n")
	for i, v := range r.vars {
		fmt.Fprintf(&b, "variable \"ctr_v%d\" {\n  default = %s\n}\n\n", i+1, v)
	}
	if len(r.later) > 0 {
		b.WriteString("resource \"terraform_data\" \"ctr_later\" {\n  input = {\n")
		for i, v := range r.later {
			fmt.Fprintf(&b, "    l%d = %s\n", i+1, v)
		}
		b.WriteString("  }\n}\n\n")
	}
	if r.defer_ {
		b.WriteString("resource \"terraform_data\" \"ctr_defer\" {}\n\n")
	}
	for _, c := range r.copies {
		b.WriteString(c + "\n\n")
	}
	return []byte(b.String())
}

// valueNode is one value of a block: an attribute's (depth 1), or one inside it (an object's
// attribute, a list element, a function argument, a conditional's result: one deeper).
type valueNode struct {
	start, end int
	depth      int
	leaf       bool // holds no other value
	constant   bool // its value needs no variable and no function
}

// blockNodes are the values of b's attributes, meta-arguments left out.
func blockNodes(b *hclsyntax.Block) []valueNode {
	var out []valueNode
	for name, a := range b.Body.Attributes {
		if !metaArguments[name] {
			out = collectNodes(a.Expr, 1, out)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].start < out[j].start })
	return out
}

func collectNodes(e hclsyntax.Expression, depth int, out []valueNode) []valueNode {
	var kids []hclsyntax.Expression
	switch x := e.(type) {
	case *hclsyntax.ParenthesesExpr:
		return collectNodes(x.Expression, depth, out)
	case *hclsyntax.LiteralValueExpr:
		if x.Val.IsNull() {
			return out // null is null whatever feeds it
		}
	case *hclsyntax.ObjectConsExpr:
		for _, it := range x.Items {
			kids = append(kids, it.ValueExpr)
		}
	case *hclsyntax.TupleConsExpr:
		kids = x.Exprs
	case *hclsyntax.FunctionCallExpr:
		kids = x.Args
	case *hclsyntax.ConditionalExpr:
		kids = []hclsyntax.Expression{x.TrueResult, x.FalseResult}
	}
	_, diags := e.Value(nil)
	rng := e.Range()
	out = append(out, valueNode{start: rng.Start.Byte, end: rng.End.Byte, depth: depth, leaf: len(kids) == 0, constant: !diags.HasErrors()})
	for _, k := range kids {
		out = collectNodes(k, depth+1, out)
	}
	return out
}

// textEdit replaces src[at:end] with text.
type textEdit struct {
	at, end int
	text    string
}

func applyEdits(src []byte, edits []textEdit) []byte {
	edits = slices.Clone(edits)
	sort.Slice(edits, func(i, j int) bool { return edits[i].at > edits[j].at })
	out := slices.Clone(src)
	for _, e := range edits {
		out = slices.Concat(out[:e.at], []byte(e.text), out[e.end:])
	}
	return out
}

// terraformCLI is the CLI the provider's tests use (scripts/ensure-terraform.sh).
func terraformCLI(t *testing.T) string {
	t.Helper()
	if tf := os.Getenv("TF_ACC_TERRAFORM_PATH"); tf != "" {
		return tf
	}
	tf, err := exec.LookPath("terraform")
	if err != nil {
		t.Skip("no Terraform CLI: set TF_ACC_TERRAFORM_PATH (eval \"$(scripts/ensure-terraform.sh)\"; make test does)")
	}
	return tf
}

var devOverridesBuild struct {
	once    sync.Once
	dir, rc string
	err     error
}

// devOverrides builds the provider once per test binary and returns a CLI configuration
// that runs it for elasticctr/ctr without installing it (dev_overrides, as make dev-config),
// and installs any other provider from its registry.
func devOverrides(t *testing.T) string {
	t.Helper()
	b := &devOverridesBuild
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", "ctr-provider-dev-")
		if err != nil {
			b.err = err
			return
		}
		b.dir = dir
		if out, err := buildProvider(filepath.Join(dir, "terraform-provider-ctr"), testVersion); err != nil {
			b.err = fmt.Errorf("go build: %v\n%s", err, out)
			return
		}
		b.rc = filepath.Join(dir, "terraformrc")
		b.err = os.WriteFile(b.rc, []byte(fmt.Sprintf("provider_installation {\n  dev_overrides { \"elasticctr/ctr\" = %q }\n  direct {}\n}\n", dir)), 0o600)
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.rc
}

// exampleEnv is the environment terraform runs the examples in: the CLI configuration, the
// values of required variables, and a connection to where no cluster listens (plans need
// none), whatever this machine's KUBE_* say.
func exampleEnv(rc string, required []string) []string {
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "KUBE_") && !strings.HasPrefix(e, "TF_VAR_") && !strings.HasPrefix(e, "TF_CLI_CONFIG_FILE=") {
			env = append(env, e)
		}
	}
	env = append(env, "TF_CLI_CONFIG_FILE="+rc, "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1",
		"KUBE_HOST="+unreachableHost, "KUBE_TOKEN=plan-only")
	for _, name := range required {
		env = append(env, "TF_VAR_"+name+"="+exampleVariables[name])
	}
	return env
}

// planErrors is what plan printed from its first error on (before it, the plan of every
// copy, manifests included).
func planErrors(out []byte) string {
	if i := bytes.Index(out, []byte("\nError: ")); i >= 0 {
		return string(out[i+1:])
	}
	return string(out)
}

func tail(out []byte) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return strings.Join(lines[max(0, len(lines)-15):], "\n")
}

// TestUnknownRewriter_CopiesPerFormAndDepth: the rewriting that TestExamples_ValuesKnownOnlyLater
// relies on makes, per form, one copy per depth with that depth's values fed, leaves
// meta-arguments and null alone, feeds a reference only through the conditional, and makes a
// data block wait.
func TestUnknownRewriter_CopiesPerFormAndDepth(t *testing.T) {
	t.Parallel()
	src := `resource "ctr_cube" "c" {
  count     = 1
  name      = "c"
  namespace = var.ns
  resources = { requests = { cpu = "2" }, limits = null }
}

data "ctr_cube" "d" {
  name = "c"
}

provider "ctr" {
  alias      = "x"
  kubernetes = { config_path = "~/.kube/config" }
}
`
	r := newUnknownRewriter()
	out, _, err := r.file([]byte(src), "main.tf")
	if err != nil {
		t.Fatal(err)
	}
	decl := string(r.declarations())
	for _, want := range []string{
		// depth 1 in each form; a reference (var.ns) only through the conditional
		`resource "ctr_cube" "c_var1" {
  count     = 1
  name      = var.ctr_v1
  namespace = var.ns
  resources = var.ctr_v2
}`,
		`resource "ctr_cube" "c_cond1" {
  count     = 1
  name      = (var.ctr_on ? "c"
  : null)
  namespace = (var.ctr_on ? var.ns
  : null)`,
		// depth 3: the map's value, unknown at plan too
		`resources = { requests = { cpu = terraform_data.ctr_later.output.l`,
		"variable \"ctr_v2\" {\n  default = { requests = { cpu = \"2\" }, limits = null }\n}",
		// the data block's copies wait too
		`data "ctr_cube" "d_var1" {
  depends_on = [terraform_data.ctr_defer]

  name = var.ctr_v`,
		`resource "terraform_data" "ctr_defer" {}`,
	} {
		if !strings.Contains(decl, want) {
			t.Errorf("the copies lack\n%s\nin\n%s", want, decl)
		}
	}
	if strings.Contains(decl, "c_var4") || strings.Contains(decl, "ctr_on ? null") || strings.Contains(decl, "count     = var.") {
		t.Errorf("a copy beyond the deepest value, of a null or of count:\n%s", decl)
	}
	for _, want := range []string{"depends_on = [terraform_data.ctr_defer]", `config_path = (var.ctr_on ? "~/.kube/config"`, `alias      = "x"`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the file lacks %s:\n%s", want, out)
		}
	}
}
