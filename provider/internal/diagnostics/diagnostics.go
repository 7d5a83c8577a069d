// Package diagnostics is the provider's one vocabulary of errors and warnings, after
// terraform-provider-random's: a summary in Title Case, then what happened with the original
// error as its cause, then what to do. (random puts the original error last; here what to do
// follows the cause it answers: "Could not create the cluster: QuotaExceeded. Raise the
// quota.") Configuration at fault is blamed on its attribute.
package diagnostics

import (
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
)

// InvalidSetting blames one attribute: detail says what is wrong and what is allowed. The
// attribute is named in the text too, since Terraform shows nested attributes at the
// resource's first line.
func InvalidSetting(kind string, at path.Path, detail string) diag.Diagnostic {
	return diag.NewAttributeErrorDiagnostic(at, "Invalid "+kind+" Setting", "Attribute "+at.String()+": "+detail)
}

// InvalidImportID refuses an import ID: want is its form with an example, e.g.
// "NAMESPACE/NAME, e.g. default/ctr-demo".
func InvalidImportID(id, want string) diag.Diagnostic {
	return diag.NewErrorDiagnostic("Invalid Import ID", fmt.Sprintf("Expected %s; got %q.", want, id))
}

// Failed is an operation that did not succeed: summary like "Apply Cube Error", happened
// like "Could not apply the objects of cube default/c", todo (may be empty) what the user can
// do, and err the cause (may be nil).
func Failed(summary, happened, todo string, err error) diag.Diagnostic {
	return diag.NewErrorDiagnostic(summary, detail(happened, todo, err))
}

// FailedAt is Failed blamed on an attribute whose value the operation used.
func FailedAt(at path.Path, summary, happened, todo string, err error) diag.Diagnostic {
	return diag.NewAttributeErrorDiagnostic(at, summary, detail(happened, todo, err))
}

// Warning is something the user should know before or after an apply.
func Warning(summary, happened, todo string) diag.Diagnostic {
	return diag.NewWarningDiagnostic(summary, detail(happened, todo, nil))
}

// detail is happened, its cause (err) after a colon, a full stop, then todo.
func detail(happened, todo string, err error) string {
	s := happened
	if err != nil {
		s += ": " + err.Error()
	}
	if len(s) > 0 && s[len(s)-1] != '.' && s[len(s)-1] != '\n' {
		s += "."
	}
	if todo != "" {
		s += " " + todo
	}
	return s
}
