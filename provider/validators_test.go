package provider

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/provider"
)

// TestBadInputs_EveryValidatorHasARow: the tables of bad values (badInputs) cover every
// check there is, so that a new one without a row fails here:
//   - every attribute of every schema (the provider's, each resource's, each data source's)
//     that has validators has a row that is refused at it;
//   - every check of internal/stack (each call of checker.bad, each FieldError made) and
//     every refusal of a setting in the provider's own code (diagnostics.InvalidSetting
//     outside the schema's validators) is the error of some row: its words match one.
//
// The rows run in TestX_BadInput, in process and through the CLI: exactly one error each,
// at its attribute, saying what is allowed.
func TestBadInputs_EveryValidatorHasARow(t *testing.T) {
	t.Parallel()
	var texts []string // every row's error
	rowsAt := map[string][]string{}
	for typ, tables := range badInputs {
		r := newBadInputRun(t, typ)
		for _, table := range tables {
			for _, c := range table() {
				rowsAt[typ] = append(rowsAt[typ], fieldOf(c.at))
				errs, _ := r.errors(typ, c.config)
				for _, e := range errs {
					texts = append(texts, e.Summary+": "+e.Detail)
				}
			}
		}
	}
	for typ, attrs := range schemaAttributes() {
		if _, ok := badInputs[typ]; !ok {
			t.Errorf("%s: no table in badInputs", typ)
			continue
		}
		for _, at := range validatedAttributes("", reflect.ValueOf(attrs)) {
			if !slices.Contains(rowsAt[typ], at) {
				t.Errorf("%s.%s has validators and no row in badInputs", typ, at)
			}
		}
	}
	checks := 0
	for _, c := range checksIn(t, filepath.Join("..", "internal", "stack"), stackCheck) {
		checks++
		if why, ok := notInTables[c.format]; ok {
			t.Logf("%s is tested elsewhere: %s", c.at, why)
			continue
		}
		if !slices.ContainsFunc(texts, c.re.MatchString) {
			t.Errorf("no row of badInputs is refused by %s: %s", c.at, c.format)
		}
	}
	for _, c := range checksIn(t, ".", providerCheck) {
		checks++
		if why, ok := notInTables[c.format]; ok {
			t.Logf("%s is tested elsewhere: %s", c.at, why)
			continue
		}
		if !slices.ContainsFunc(texts, c.re.MatchString) {
			t.Errorf("no row of badInputs is refused by %s: %s", c.at, c.format)
		}
	}
	if checks < 80 {
		t.Errorf("only %d checks found: the search misses some", checks)
	}
}

// notInTables are the provider's refusals that no configuration alone can provoke, by their
// words, and where they are tested.
var notInTables = map[string]string{
	"%s does not keep version %q: it keeps %q (kept_versions at the last refresh: the served version and the one before it)": "a pin of a cube that exists: TestPlanPin_OnlyAKeptVersion",
	"%q is an annotation ctr sets on these pods; choose another key":                                                         "every annotation ctr sets on pods is under a reserved prefix, refused first: internal/stack's TestPodSettings",
}

// fieldOf is an attribute path without its list indexes and map keys: `pod.volumes[0].name`
// is pod.volumes.name, `env["X"]` env.
func fieldOf(at string) string {
	return regexp.MustCompile(`\[[^\]]*\]`).ReplaceAllString(at, "")
}

// schemaAttributes are the attributes of every schema, by type as badInputs names them.
func schemaAttributes() map[string]any {
	ctx := context.Background()
	out := map[string]any{}
	var p provider.SchemaResponse
	(&ctrProvider{}).Schema(ctx, provider.SchemaRequest{}, &p)
	out["provider"] = p.Schema.Attributes
	for typ, s := range resourceSchemas() {
		out[typ] = s.Attributes
	}
	for _, newDataSource := range (&ctrProvider{}).DataSources(ctx) {
		d := newDataSource()
		var meta datasource.MetadataResponse
		d.Metadata(ctx, datasource.MetadataRequest{ProviderTypeName: providerTypeName}, &meta)
		var s datasource.SchemaResponse
		d.Schema(ctx, datasource.SchemaRequest{}, &s)
		out["data."+meta.TypeName] = s.Schema.Attributes
	}
	return out
}

// validatedAttributes are the paths (as fieldOf spells them) of the attributes in attrs (a
// map of a schema package's attributes) that have validators, theirs or their nested
// objects', at every depth. The schema packages' attribute types are walked by their fields:
// Validators, Attributes (a single nested object) and NestedObject (a list, set or map of them).
func validatedAttributes(prefix string, attrs reflect.Value) []string {
	var out []string
	for _, k := range attrs.MapKeys() {
		a := attrs.MapIndex(k).Elem()
		at := strings.TrimPrefix(prefix+"."+k.String(), ".")
		if v := a.FieldByName("Validators"); v.IsValid() && v.Len() > 0 {
			out = append(out, at)
		}
		if nested := a.FieldByName("Attributes"); nested.IsValid() {
			out = append(out, validatedAttributes(at, nested)...)
		}
		if obj := a.FieldByName("NestedObject"); obj.IsValid() {
			if obj.FieldByName("Validators").Len() > 0 && !slices.Contains(out, at) {
				out = append(out, at)
			}
			out = append(out, validatedAttributes(at, obj.FieldByName("Attributes"))...)
		}
	}
	return out
}

// check is one refusal in the code: where, its words (a format; %v and any part not written
// out match anything) and the regexp of them.
type check struct {
	at, format string
	re         *regexp.Regexp
}

// stackCheck finds internal/stack's checks: c.bad(path, format, ...) and FieldError{Detail: ...}.
func stackCheck(n ast.Node) ast.Expr {
	switch n := n.(type) {
	case *ast.CallExpr:
		if sel, ok := n.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "bad" && len(n.Args) >= 2 {
			return n.Args[1]
		}
	case *ast.CompositeLit:
		if id, ok := n.Type.(*ast.Ident); ok && id.Name == "FieldError" {
			for _, e := range n.Elts {
				if kv, ok := e.(*ast.KeyValueExpr); ok && kv.Key.(*ast.Ident).Name == "Detail" {
					return kv.Value
				}
			}
		}
	}
	return nil
}

// providerCheck finds the provider's refusals of a setting: diagnostics.InvalidSetting(kind,
// path, detail) in its own code (a schema validator's are the schema walk's).
func providerCheck(n ast.Node) ast.Expr {
	if call, ok := n.(*ast.CallExpr); ok {
		if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "InvalidSetting" && len(call.Args) == 3 {
			return call.Args[2]
		}
	}
	return nil
}

// checksIn are the checks that find finds in the Go files of dir (tests and validators'
// methods left out), with words of their own: a detail that is only a value passed on
// (err.Error(), a FieldError's) is the check that made it.
func checksIn(t *testing.T, dir string, find func(ast.Node) ast.Expr) []check {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var out []check
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok && fn.Recv != nil && schemaValidatorMethod.MatchString(fn.Name.Name) {
				continue // a schema validator's: the schema walk's
			}
			ast.Inspect(decl, func(n ast.Node) bool {
				e := find(n)
				if e == nil {
					return true
				}
				if call, ok := e.(*ast.CallExpr); ok && isSprintf(call) {
					e = call.Args[0]
				}
				format, literal := words(e)
				if literal {
					out = append(out, check{at: fset.Position(n.Pos()).String(), format: format, re: formatRE(format)})
				}
				return true
			})
		}
	}
	return out
}

// schemaValidatorMethod names the methods of a schema validator (ValidateString, ...).
var schemaValidatorMethod = regexp.MustCompile(`^Validate(String|Int64|Bool|Float64|Number|List|Map|Set|Object|Dynamic)$`)

func isSprintf(call *ast.CallExpr) bool {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	return ok && sel.Sel.Name == "Sprintf" && len(call.Args) > 0
}

// words are the text of a string expression, %v for each part that is not a literal; literal
// says some of it is.
func words(e ast.Expr) (string, bool) {
	switch e := e.(type) {
	case *ast.BasicLit:
		if s, err := strconv.Unquote(e.Value); err == nil {
			return s, true
		}
	case *ast.BinaryExpr:
		if e.Op == token.ADD {
			x, xl := words(e.X)
			y, yl := words(e.Y)
			return x + y, xl || yl
		}
	case *ast.ParenExpr:
		return words(e.X)
	}
	return "%v", false
}

var verb = regexp.MustCompile(`%[-+# 0-9.]*[a-zA-Z]`)

// formatRE matches what a format prints, whatever its arguments.
func formatRE(format string) *regexp.Regexp {
	parts := verb.Split(strings.ReplaceAll(format, "%%", "%"), -1)
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return regexp.MustCompile("(?s)" + strings.Join(parts, ".*?"))
}

// providerBadInputs are the provider configuration's bad values: see badInputs.
func providerBadInputs() []badInput {
	base := validConfigs["provider"]
	return append([]badInput{
		{"registry with a scheme", with(base, "image_registry", "https://registry.example.com"), "image_registry", `must be`},
		{"poll interval", with(base, "cce_poll_interval", "often"), "cce_poll_interval", `"often" is not a positive duration`},
	}, connectionBadInputs(base, false)...)
}

// namespaceBadInputs are ctr_namespace's bad values: see badInputs.
func namespaceBadInputs() []badInput {
	base := validConfigs["ctr_namespace"]
	return append([]badInput{
		{"name with capitals", with(base, "name", "Ads"), "name", `Attribute name must be at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit, got: Ads`},
		{"name too long", with(base, "name", strings.Repeat("a", 64)), "name", `at most 63`},
		{"ctr's label", with(base, "labels", map[string]any{"ctr.elasticctr.io/owner": "x"}), `labels["ctr.elasticctr.io/owner"]`, `is set by ctr or Kubernetes itself`},
	}, connectionBadInputs(base, true)...)
}

// queueBadInputs are ctr_queue's bad values: see badInputs.
func queueBadInputs() []badInput {
	base := validConfigs["ctr_queue"]
	return append([]badInput{
		{"name with capitals", with(base, "name", "Ads"), "name", `lowercase letters, digits and '-'`},
		{"Volcano's own queue", with(base, "name", "default"), "name", `"default" is Volcano's own queue, which Volcano creates and never deletes`},
		{"weight 0", with(base, "weight", 0), "weight", `value must be between 1 and`},
		{"capability of no resource", with(base, "capability", map[string]any{"c p u": "2"}), `capability["c p u"]`, `"c p u" is not a resource name`},
		{"capability not a quantity", with(base, "capability", map[string]any{"cpu": "lots"}), `capability["cpu"]`, `"lots" is not a quantity, e.g. 500m or 2 for cpu`},
	}, connectionBadInputs(base, true)...)
}

// dataSourceBadInputs are a data source's bad values: see badInputs.
func dataSourceBadInputs(typ string) func() []badInput {
	return func() []badInput {
		base := validConfigs[typ]
		return append([]badInput{
			{"name starting with a digit", with(base, "name", "1x"), "name", `starting with a letter`},
			{"namespace with capitals", with(base, "namespace", "Ads"), "namespace", `at most 63 lowercase letters`},
		}, connectionBadInputs(base, true)...)
	}
}

// connectionBadInputs are the bad values of a `kubernetes` connection in a configuration:
// a resource's (own) or the provider's.
func connectionBadInputs(base map[string]any, own bool) []badInput {
	conn := func(kv ...any) map[string]any { return with(base, "kubernetes", with(map[string]any{}, kv...)) }
	rows := []badInput{
		{"empty connection", conn(), "kubernetes", `Attribute kubernetes: sets nothing`},
		{"two ways to name kubeconfigs", conn("config_path", "/kubeconfig", "config_paths", []any{"/a", "/b"}),
			"kubernetes.config_path", `"kubernetes.config_paths" cannot be specified when "kubernetes.config_path" is specified`},
		{"empty config path", conn("config_path", ""), "kubernetes.config_path", `string length must be at least 1`},
		{"no config paths", conn("config_paths", []any{}), "kubernetes.config_paths", `list must contain at least 1 elements`},
		{"empty host", conn("host", "", "config_path", "/kubeconfig"), "kubernetes.host", `string length must be at least 1`},
		{"proxy without a scheme", conn("config_path", "/kubeconfig", "proxy_url", "proxy:3128"), "kubernetes.proxy_url", `must be an http://, https:// or socks5:// URL`},
		{"exec with an unknown API version", conn("host", "https://k:6443", "exec", map[string]any{"api_version": "client.authentication.k8s.io/v1alpha1", "command": "aws"}),
			"kubernetes.exec.api_version", `value must be one of`},
		{"exec without a command", conn("host", "https://k:6443", "exec", map[string]any{"api_version": "client.authentication.k8s.io/v1", "command": ""}),
			"kubernetes.exec.command", `string length must be at least 1`},
	}
	if own {
		return append(rows,
			badInput{"static token", conn("host", "https://k:6443", "token", "t"), "kubernetes.token",
				`Attribute kubernetes.token: a resource's kubernetes is stored in state .* Put host, token and certificates on the provider`},
			badInput{"client certificate and key", conn("config_path", "/kubeconfig", "client_certificate", "PEM", "client_key", "KEY"), "kubernetes.client_certificate",
				`a resource's kubernetes is stored in state`},
			badInput{"client key", conn("config_path", "/kubeconfig", "client_key", "KEY"), "kubernetes.client_key", `a resource's kubernetes is stored in state`},
			badInput{"exec and a token", conn("host", "https://k:6443", "token", "t", "exec", map[string]any{"api_version": "client.authentication.k8s.io/v1", "command": "aws"}),
				"kubernetes.token", `a resource's kubernetes is stored in state`},
		)
	}
	return append(rows,
		badInput{"exec and a token", conn("host", "https://k:6443", "token", "t", "exec", map[string]any{"api_version": "client.authentication.k8s.io/v1", "command": "aws"}),
			"kubernetes.exec", `cannot be specified when`},
		badInput{"client certificate without its key", conn("host", "https://k:6443", "client_certificate", "PEM"), "kubernetes.client_certificate",
			`a client certificate authenticates only with its private key: set client_key \(or KUBE_CLIENT_KEY_DATA\) too, or authenticate with token or exec instead`},
		badInput{"client key without its certificate", conn("host", "https://k:6443", "client_key", "KEY"), "kubernetes.client_key",
			`set client_certificate \(or KUBE_CLIENT_CERT_DATA\) too, or leave client_key out`},
	)
}
