package stack

import (
	"testing"

	"github.com/elasticctr/terraform-provider-ctr/cube/image"
)

// TestCubeImageIsTheImageBuilt: for a release, the image the provider defaults to is the tag
// that `make images` / `make push-image` give the image built from the same version string
// (both take VERSION, a release tag without its "v", as goreleaser's {{ .Version }}).
func TestCubeImageIsTheImageBuilt(t *testing.T) {
	for _, v := range []string{"1.2.3", "0.1.0-rc.1"} {
		tag, err := image.Tag(image.Repository, v)
		if err != nil {
			t.Fatal(err)
		}
		if got := CubeImage(v); got != tag.String() {
			t.Errorf("version %s: the provider defaults to %q, the build tags %q", v, got, tag.String())
		}
	}
}
