package transfer

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/atomicfile"
	"github.com/elasticctr/terraform-provider-ctr/cube/retry"
)

// replaceFile writes content to a new file renamed over path: a new inode,
// as a Secret volume's update gives.
func replaceFile(t *testing.T, path, content string) {
	t.Helper()
	if err := atomicfile.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestTokenRotation: the transfer reads a rotated token file without a
// restart. An agent the rotation has not reached yet (it still knows only
// the old token) is asked again with the previous one, so no call fails;
// POST /trigger takes both during the grace period; and a 401 that no token
// cures is retried, not taken as final.
func TestTokenRotation(t *testing.T) {
	dir := t.TempDir()
	tokFile := filepath.Join(dir, "token")
	replaceFile(t, tokFile, "old\n")
	lagging := (&fakeAgent{token: "old"}).start(t).addr
	tr := newTestTransfer(t, Options{Replicas: [][]string{{lagging}}, TokenFile: tokFile, StepTimeout: 2 * time.Second})
	ctx := retry.WithLog(context.Background(), tr.log)
	if _, err := tr.call(ctx, replica{0, lagging}, "/agent/status", nil); err != nil {
		t.Fatalf("before the rotation: %v", err)
	}
	replaceFile(t, tokFile, "new\n")
	time.Sleep(1100 * time.Millisecond) // the token file is looked at once a second
	if got := tr.token.Current(); got != "new" {
		t.Fatalf("the transfer sends %q after the rotation, want new", got)
	}
	if _, err := tr.call(ctx, replica{0, lagging}, "/agent/status", nil); err != nil {
		t.Fatalf("an agent the rotation has not reached: %v", err)
	}
	updated := (&fakeAgent{token: "new"}).start(t).addr
	if _, err := tr.call(ctx, replica{0, updated}, "/agent/status", nil); err != nil {
		t.Fatalf("an agent with the new token: %v", err)
	}
	other := (&fakeAgent{token: "another"}).start(t).addr
	if _, err := tr.call(ctx, replica{0, other}, "/agent/status", nil); err == nil || retry.IsPermanent(err) {
		t.Fatalf("an agent refusing both tokens: %v; want an error that is retried", err)
	}

	api, _, err := tr.Handlers(true)
	if err != nil {
		t.Fatal(err)
	}
	for tok, want := range map[string]int{"old": http.StatusAccepted, "new": http.StatusAccepted, "another": http.StatusUnauthorized} {
		req := httptest.NewRequest(http.MethodPost, "/trigger", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		rec := httptest.NewRecorder()
		api.ServeHTTP(rec, req)
		if rec.Code != want {
			t.Errorf("POST /trigger with %s: %d, want %d", tok, rec.Code, want)
		}
	}
}
