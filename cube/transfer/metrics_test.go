package transfer

import (
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/prometheus/common/expfmt"
)

// TestMetricFamilies_ListWhatIsServed: the status API's GET /metrics serves only families
// that MetricFamilies lists, each with the type it lists; and MetricFamilies lists the
// vectors that have no series yet (no heal, no rollout), which /metrics leaves out.
func TestMetricFamilies_ListWhatIsServed(t *testing.T) {
	listed, err := MetricFamilies()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	tr := testTransfer(t, dir, filepath.Join(dir, "base.txt"))
	status, _, err := tr.Handlers(false)
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	status.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	var p expfmt.TextParser
	served, err := p.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, must := range []string{"cube_transfer_phase", "cube_transfer_rollout_seconds", "go_goroutines"} {
		if _, ok := served[must]; !ok {
			t.Errorf("/metrics serves no %s", must)
		}
	}
	for name, mf := range served {
		typ, ok := listed[name]
		if !ok {
			t.Errorf("/metrics serves %s, which MetricFamilies does not list", name)
		} else if typ != mf.GetType() {
			t.Errorf("%s: served as %v, listed as %v", name, mf.GetType(), typ)
		}
	}
	for _, vec := range []string{"cube_transfer_heals_total", "cube_transfer_rollouts_total", "cube_transfer_served_version_info"} {
		if _, ok := served[vec]; ok {
			t.Fatalf("%s has series before any rollout or heal: the next check proves nothing", vec)
		}
		if _, ok := listed[vec]; !ok {
			t.Errorf("MetricFamilies leaves out %s, a vector with no series yet", vec)
		}
	}
}
