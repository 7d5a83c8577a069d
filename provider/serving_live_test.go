package provider

import (
	"context"
	"testing"
)

// A cube_transfer_url that is not an in-cluster Service URL (or no URL at all) is not
// compared with the serving's model: no request, no panic.
func TestCubeServedID_NotAServiceURL(t *testing.T) {
	for _, u := range []string{"http://a b:8099", "http://[::1", "http://transfer:8099", "http://t.ns.svc", ""} {
		if id, forbidden := cubeServedID(context.Background(), nil, u); id != "" || forbidden != nil {
			t.Errorf("%q: %q", u, id)
		}
	}
}
