package server

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
)

// TestMetricFamilies_ListWhatIsServed: a server that loaded a dictionary and answered
// seeks serves at GET /metrics only families that MetricFamilies lists, each with the type
// it lists; and MetricFamilies lists families with no series yet (a vector whose labels have
// not happened) that /metrics leaves out.
func TestMetricFamilies_ListWhatIsServed(t *testing.T) {
	listed, err := MetricFamilies()
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Options{DataDir: buildData(t, 100), Shard: 0})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	seek := httptest.NewRecorder()
	s.httpHandler().ServeHTTP(seek, httptest.NewRequest(http.MethodPost, "/DictService/seek", strings.NewReader(`{"keys":[0,1,999999]}`)))
	if seek.Code != http.StatusOK {
		t.Fatalf("seek: %d %s", seek.Code, seek.Body)
	}
	rec := httptest.NewRecorder()
	s.ProbeHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	var p expfmt.TextParser
	served, err := p.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, must := range []string{"cube_keys_total", "cube_key_misses_total", "cube_request_duration_seconds", "cube_dict_info", "go_goroutines"} {
		if _, ok := served[must]; !ok {
			t.Errorf("/metrics serves no %s after a seek", must)
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
	if _, ok := served["cube_connections_closed_total"]; ok {
		t.Fatal("cube_connections_closed_total has series before any connection closed: the next check proves nothing")
	}
	if _, ok := listed["cube_connections_closed_total"]; !ok {
		t.Error("MetricFamilies leaves out cube_connections_closed_total, a vector with no series yet")
	}
}
