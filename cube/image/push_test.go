package image

import (
	"context"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// TestPushLayout: the layout WriteLayout writes — one image, or a multi-platform index — is
// pushed to a registry (go-containerregistry's own, on loopback) under the tag, and what the
// registry then serves has the layout's digest.
func TestPushLayout(t *testing.T) {
	srv := httptest.NewServer(registry.New())
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	img := func(arch string) v1.Image {
		t.Helper()
		i, err := random.Image(1024, 1)
		if err != nil {
			t.Fatal(err)
		}
		cf, _ := i.ConfigFile()
		cf.OS, cf.Architecture = "linux", arch
		return withConfig(t, i, cf)
	}
	for _, c := range []struct {
		name string
		imgs []v1.Image
	}{
		{"one image", []v1.Image{img("amd64")}},
		{"multi-platform", []v1.Image{img("amd64"), img("arm64")}},
	} {
		dir := filepath.Join(t.TempDir(), "oci")
		want, err := WriteLayout(dir, "1.2.3", c.imgs...)
		if err != nil {
			t.Fatal(err)
		}
		tag, err := name.NewTag(u.Host+"/elasticctr/cube:1.2.3", name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Push(context.Background(), dir, tag)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		desc, err := remote.Get(tag)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got != want || desc.Digest != want {
			t.Fatalf("%s: layout %s, pushed %s, registry serves %s", c.name, want, got, desc.Digest)
		}
		if (len(c.imgs) > 1) != desc.MediaType.IsIndex() {
			t.Fatalf("%s: registry serves %s", c.name, desc.MediaType)
		}
	}
}

func withConfig(t *testing.T, img v1.Image, cf *v1.ConfigFile) v1.Image {
	t.Helper()
	out, err := mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
