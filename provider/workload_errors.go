package provider

import (
	"errors"
	"strconv"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"

	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
	"github.com/elasticctr/terraform-provider-ctr/provider/internal/diagnostics"
)

// settingErrors reports stack's FieldErrors, each at its attribute.
func settingErrors(kind string, errs stack.FieldErrors) diag.Diagnostics {
	var diags diag.Diagnostics
	for _, e := range errs {
		diags.Append(diagnostics.InvalidSetting(kind, fieldPath(e.Path), e.Detail))
	}
	return diags
}

// fieldPath turns a stack.FieldError path ("trainer.requests[\"cpu\"]", "policies[0].event")
// into an attribute path.
func fieldPath(p string) path.Path {
	var out path.Path
	first := true
	for len(p) > 0 {
		switch {
		case p[0] == '.':
			p = p[1:]
		case p[0] == '[':
			end := strings.IndexByte(p, ']')
			if end < 0 {
				return out
			}
			inner := p[1:end]
			p = p[end+1:]
			if strings.HasPrefix(inner, `"`) {
				out = out.AtMapKey(strings.Trim(inner, `"`))
			} else {
				i, err := strconv.Atoi(inner)
				if err != nil {
					return out
				}
				out = out.AtListIndex(i)
			}
		default:
			end := strings.IndexAny(p, ".[")
			if end < 0 {
				end = len(p)
			}
			name := p[:end]
			p = p[end:]
			if first {
				out = path.Root(name)
				first = false
			} else {
				out = out.AtName(name)
			}
		}
	}
	return out
}

// renderError reports a rendering that failed: settings errors at their attributes (found
// at plan time when validation had to wait for values known only then), anything else as is.
func renderError(kind string, err error) diag.Diagnostics {
	var errs stack.FieldErrors
	if errors.As(err, &errs) {
		return settingErrors(kind, errs)
	}
	return diag.Diagnostics{diagnostics.Failed("Render "+kind+" Error", "Could not render the Kubernetes objects", "", err)}
}
