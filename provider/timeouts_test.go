package provider

import (
	"strings"
	"testing"
	"time"

	rschema "github.com/hashicorp/terraform-plugin-framework/resource/schema"
)

// Every resource's timeouts say their defaults, which are the ones its operations use, and
// have exactly the operations that take a timeout.
func TestTimeouts_DescribeTheirDefaults(t *testing.T) {
	used := map[string]opTimeouts{
		"ctr_cluster": clusterTimeouts, "ctr_namespace": namespaceTimeouts, "ctr_queue": queueTimeouts,
		"ctr_cube": cubeWorkload.timeouts, "ctr_serving": servingWorkload.timeouts, "ctr_training_job": trainingJobWorkload.timeouts,
	}
	for typ, s := range resourceSchemas() {
		o, ok := used[typ]
		if !ok {
			t.Errorf("%s: which timeouts does it use?", typ)
			continue
		}
		attr := s.Attributes["timeouts"].(rschema.SingleNestedAttribute)
		if attr.MarkdownDescription == "" {
			t.Errorf("%s: timeouts has no description", typ)
		}
		for op, def := range map[string]time.Duration{"create": o.Create, "update": o.Update, "delete": o.Delete} {
			a, present := attr.Attributes[op]
			if present != (def > 0) {
				t.Errorf("%s: timeouts.%s present %v, default %v", typ, op, present, def)
				continue
			}
			if present && !strings.HasSuffix(a.GetMarkdownDescription(), defaultsTo(def)) {
				t.Errorf("%s: timeouts.%s says %q, want it to end with %q", typ, op, a.GetMarkdownDescription(), defaultsTo(def))
			}
		}
	}
}
