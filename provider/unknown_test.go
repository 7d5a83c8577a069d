package provider

import (
	"slices"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/types"
)

// TestModelKnown_WalksEveryAttributeRenderingReads: an unknown value anywhere rendering reads
// (deep in a nested block too) makes the model unknown; the connection, timeouts, wait and the
// upload token do not.
func TestModelKnown_WalksEveryAttributeRenderingReads(t *testing.T) {
	t.Parallel()
	m := trainingJobModel{ModelExport: &modelExportModel{Var: types.StringUnknown()}}
	if modelKnown(&m, trainingJobWorkload.skips()) {
		t.Error("an unknown model_export.var was not noticed")
	}
	m = trainingJobModel{Wait: types.StringUnknown(), UploadToken: types.StringUnknown()}
	m.Kubernetes = types.ObjectUnknown(nil)
	if !modelKnown(&m, trainingJobWorkload.skips()) {
		t.Error("wait, upload_token or kubernetes unknown made the model unknown; rendering reads none of them")
	}
	m = trainingJobModel{Phase: types.StringUnknown(), FileServerURL: types.StringUnknown()}
	if !modelKnown(&m, trainingJobWorkload.skips()) {
		t.Error("what only the provider sets (phase, file_server_url), unknown in every plan, made the model unknown")
	}
	m = trainingJobModel{}
	m.Name = types.StringUnknown()
	if modelKnown(&m, trainingJobWorkload.skips()) {
		t.Error("an unknown name (an embedded field) was not noticed")
	}
	c := cubeModel{Tolerations: []tolerationModel{{Key: types.StringUnknown()}}}
	if modelKnown(&c, cubeWorkload.skips()) {
		t.Error("an unknown toleration key was not noticed")
	}
}

// TestNestedObjects_FromTheModels: every block a model reads into a pointer or a slice.
func TestNestedObjects_FromTheModels(t *testing.T) {
	t.Parallel()
	for _, want := range []string{"pserver", "trainer", "worker", "policies", "dataset", "model_output", "model_export", "file_server", "security_context", "pod"} {
		if !slices.Contains(trainingJobWorkload.nested, want) {
			t.Errorf("training job: %s missing from %v", want, trainingJobWorkload.nested)
		}
	}
	if slices.Contains(trainingJobWorkload.nested, "name") || slices.Contains(trainingJobWorkload.nested, "timeouts") {
		t.Errorf("training job: a plain attribute listed as a nested object: %v", trainingJobWorkload.nested)
	}
}
