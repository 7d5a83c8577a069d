package server

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/atomicfile"
	"github.com/elasticctr/terraform-provider-ctr/internal/cubetest"
)

// TestControlTokenRotation: with --control-token-file, a rotated token file
// is read without a restart: a peer with the new token is accepted at once,
// one with the old token still (the rotation reaches pods at different
// moments), and any other token is refused.
func TestControlTokenRotation(t *testing.T) {
	dir := t.TempDir()
	tokFile := filepath.Join(dir, "token")
	write := func(tok string) {
		if err := atomicfile.WriteFile(tokFile, []byte(tok+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("old")
	_, addr := serveWith(t, 10, func(o *Options) { o.ControlTokenFile = tokFile })
	status := func(tok string) int {
		return cubetest.Status(t, http.MethodPost, "http://"+addr+"/ControlService/cmd", tok, strings.NewReader(`{"cmd":"status"}`))
	}
	if status("old") != 200 || status("new") != 401 {
		t.Fatal("before the rotation: want old accepted, new refused")
	}
	write("new")
	time.Sleep(200 * time.Millisecond) // past the bound on looks at the file a refused token causes
	for tok, want := range map[string]int{"new": 200, "old": 200, "other": 401} {
		if got := status(tok); got != want {
			t.Errorf("after the rotation, %s: %d, want %d", tok, got, want)
		}
	}
}
