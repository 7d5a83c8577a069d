package image_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/image"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const testVersion = "v9.8.7-test"

var created = time.Unix(1700000000, 0).UTC()

// cubeBinary compiles one static linux/amd64 cube for the whole package: the
// build dominates the run time, so every test shares it.
var cubeBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "cube-image-test-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "cube")
	return bin, image.BuildBinary(context.Background(), "amd64", testVersion, bin)
})

func TestMain(m *testing.M) {
	code := m.Run()
	if bin, err := cubeBinary(); err == nil {
		os.RemoveAll(filepath.Dir(bin))
	}
	os.Exit(code)
}

func binary(t *testing.T) string {
	t.Helper()
	bin, err := cubeBinary()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

func options(t *testing.T) image.Options {
	return image.Options{
		Binary: binary(t), Version: testVersion, Revision: "0123456789abcdef",
		Source: "https://example.invalid/ctr", Licenses: "MPL-2.0", Created: created,
	}
}

func build(t *testing.T, opts image.Options) v1.Image {
	t.Helper()
	img, err := image.Build(opts)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func digest(t *testing.T, img v1.Image) v1.Hash {
	t.Helper()
	h, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestImage writes the image as an OCI layout, opens it again as any consumer
// would, and checks what a pod relies on.
func TestImage(t *testing.T) {
	built := build(t, options(t))
	oci := filepath.Join(t.TempDir(), "oci")
	top, err := image.WriteLayout(oci, testVersion, built)
	if err != nil {
		t.Fatal(err)
	}
	if top != digest(t, built) {
		t.Fatalf("WriteLayout returned %s, image is %s", top, digest(t, built))
	}
	idx, err := layout.ImageIndexFromPath(oci)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 {
		t.Fatalf("index.json has %d manifests, want 1", len(im.Manifests))
	}
	desc := im.Manifests[0]
	if desc.MediaType != types.OCIManifestSchema1 || desc.Digest != top ||
		desc.Annotations[image.RefNameAnnotation] != testVersion ||
		desc.Platform == nil || desc.Platform.OS != "linux" || desc.Platform.Architecture != "amd64" {
		t.Fatalf("index.json entry %+v (platform %+v)", desc, desc.Platform)
	}
	img, err := idx.Image(desc.Digest)
	if err != nil {
		t.Fatal(err)
	}

	wantLabels := map[string]string{
		"org.opencontainers.image.title":       "cube",
		"org.opencontainers.image.version":     testVersion,
		"org.opencontainers.image.revision":    "0123456789abcdef",
		"org.opencontainers.image.source":      "https://example.invalid/ctr",
		"org.opencontainers.image.licenses":    "MPL-2.0",
		"org.opencontainers.image.created":     "2023-11-14T22:13:20Z",
		"org.opencontainers.image.description": "",
	}
	checkLabels := func(t *testing.T, what string, got map[string]string) {
		t.Helper()
		for k, v := range wantLabels {
			g, ok := got[k]
			if !ok || (v != "" && g != v) || g == "" {
				t.Errorf("%s %s = %q, want %q", what, k, g, v)
			}
		}
		if len(got) != len(wantLabels) {
			t.Errorf("%s has %d entries, want %d: %v", what, len(got), len(wantLabels), got)
		}
	}

	t.Run("config", func(t *testing.T) {
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		c := cf.Config
		if cf.OS != "linux" || cf.Architecture != "amd64" || !cf.Created.Time.Equal(created) {
			t.Errorf("platform %s/%s created %s", cf.OS, cf.Architecture, cf.Created.Time)
		}
		if !reflect.DeepEqual(c.Entrypoint, []string{"/cube"}) {
			t.Errorf("Entrypoint %q", c.Entrypoint)
		}
		if len(c.Cmd) == 0 || c.Cmd[0] != "server" || !strings.Contains(strings.Join(c.Cmd, " "), "--data /data") {
			t.Errorf("Cmd %q, want a server on /data", c.Cmd)
		}
		if c.User != "65532:65532" {
			t.Errorf("User %q, want 65532:65532 (non-root, numeric so runAsNonRoot can verify it)", c.User)
		}
		if c.WorkingDir != "/data" {
			t.Errorf("WorkingDir %q", c.WorkingDir)
		}
		if !reflect.DeepEqual(c.Env, []string{"PATH=/"}) {
			t.Errorf("Env %q", c.Env)
		}
		wantPorts := map[string]struct{}{"8027/tcp": {}, "8099/tcp": {}, "8080/tcp": {}}
		if !reflect.DeepEqual(c.ExposedPorts, wantPorts) {
			t.Errorf("ExposedPorts %v", c.ExposedPorts)
		}
		checkLabels(t, "label", c.Labels)
		if len(cf.History) != 1 || !cf.History[0].Created.Time.Equal(created) {
			t.Errorf("history %+v", cf.History)
		}
	})

	t.Run("manifest", func(t *testing.T) {
		m, err := img.Manifest()
		if err != nil {
			t.Fatal(err)
		}
		if m.MediaType != types.OCIManifestSchema1 || m.Config.MediaType != types.OCIConfigJSON {
			t.Errorf("media types %s, config %s; want OCI", m.MediaType, m.Config.MediaType)
		}
		checkLabels(t, "annotation", m.Annotations)
		if len(m.Layers) != 1 || m.Layers[0].MediaType != types.OCILayer {
			t.Fatalf("layers %+v, want one %s", m.Layers, types.OCILayer)
		}
	})

	t.Run("layer", func(t *testing.T) {
		files := layerFiles(t, img)
		type entry struct {
			typ      byte
			mode     int64
			uid, gid int
		}
		want := map[string]entry{
			"cube":       {tar.TypeReg, 0o755, 65532, 65532},
			"data/":      {tar.TypeDir, 0o755, 65532, 65532},
			"etc/":       {tar.TypeDir, 0o755, 0, 0},
			"etc/group":  {tar.TypeReg, 0o644, 0, 0},
			"etc/passwd": {tar.TypeReg, 0o644, 0, 0},
		}
		for _, f := range files {
			w, ok := want[f.Name]
			if !ok {
				t.Errorf("unexpected %q in the layer", f.Name)
				continue
			}
			delete(want, f.Name)
			if got := (entry{f.Typeflag, f.Mode, f.Uid, f.Gid}); got != w {
				t.Errorf("%s: type %c mode %o owner %d:%d, want type %c mode %o owner %d:%d",
					f.Name, got.typ, got.mode, got.uid, got.gid, w.typ, w.mode, w.uid, w.gid)
			}
			if !f.ModTime.Equal(created) {
				t.Errorf("%s: mtime %s, want %s", f.Name, f.ModTime, created)
			}
		}
		for name := range want {
			t.Errorf("%q missing from the layer", name)
		}
		if p := string(fileBody(t, img, "etc/passwd")); !strings.Contains(p, "\nnonroot:x:65532:65532:") {
			t.Errorf("/etc/passwd has no nonroot 65532:\n%s", p)
		}
	})

	t.Run("runs", func(t *testing.T) {
		if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
			t.Skipf("cannot run a linux/amd64 binary on %s/%s", runtime.GOOS, runtime.GOARCH)
		}
		bin := filepath.Join(t.TempDir(), "cube")
		if err := os.WriteFile(bin, fileBody(t, img, "cube"), 0o755); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(bin, "version").CombinedOutput()
		if err != nil || string(out) != "cube "+testVersion+"\n" {
			t.Fatalf("/cube version: %q, %v; want %q", out, err, "cube "+testVersion+"\n")
		}
	})

	t.Run("reproducible", func(t *testing.T) {
		if again := digest(t, build(t, options(t))); again != top {
			t.Fatalf("second build %s, first %s", again, top)
		}
		oci2 := filepath.Join(t.TempDir(), "oci")
		if _, err := image.WriteLayout(oci2, testVersion, build(t, options(t))); err != nil {
			t.Fatal(err)
		}
		a, _ := os.ReadFile(filepath.Join(oci, "index.json"))
		b, _ := os.ReadFile(filepath.Join(oci2, "index.json"))
		if len(a) == 0 || !bytes.Equal(a, b) {
			t.Fatalf("index.json differs between builds:\n%s\n%s", a, b)
		}
		// The inputs that must show in the digest do.
		for name, change := range map[string]func(*image.Options){
			"version":  func(o *image.Options) { o.Version = "v9.8.8" },
			"revision": func(o *image.Options) { o.Revision = "fedcba" },
			"created":  func(o *image.Options) { o.Created = created.Add(time.Second) },
		} {
			o := options(t)
			change(&o)
			if digest(t, build(t, o)) == top {
				t.Errorf("changing the %s left the digest unchanged", name)
			}
		}
	})

	t.Run("tarball", func(t *testing.T) {
		tag, err := image.Tag(image.Repository, testVersion)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "cube-image.tar")
		if err := image.WriteTarball(path, tag, img); err != nil {
			t.Fatal(err)
		}
		m, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(path) })
		if err != nil {
			t.Fatal(err)
		}
		if len(m) != 1 || !reflect.DeepEqual(m[0].RepoTags, []string{"ghcr.io/elasticctr/cube:" + testVersion}) || len(m[0].Layers) != 1 {
			t.Fatalf("manifest.json %+v", m)
		}
		loaded, err := tarball.ImageFromPath(path, &tag)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := loaded.ConfigName()
		want, _ := img.ConfigName()
		if got != want {
			t.Fatalf("tarball config %s, image config %s", got, want)
		}
	})
}

// TestBuildRefuses checks the binaries that would fail only at container start.
func TestBuildRefuses(t *testing.T) {
	text := filepath.Join(t.TempDir(), "cube.sh")
	if err := os.WriteFile(text, []byte("#!/bin/sh\necho cube\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		opts image.Options
		want error
	}{
		{"no binary", image.Options{}, nil},
		{"missing file", image.Options{Binary: filepath.Join(t.TempDir(), "nope")}, os.ErrNotExist},
		{"script", image.Options{Binary: text}, image.ErrNotELF},
		{"other arch", image.Options{Binary: binary(t), Arch: "arm64"}, image.ErrWrongArch},
		{"unknown arch", image.Options{Binary: binary(t), Arch: "riscv64"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			img, err := image.Build(tc.opts)
			if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) {
				t.Fatalf("Build = %v, %v; want error %v", img, err, tc.want)
			}
		})
	}
	t.Run("dynamic", func(t *testing.T) {
		dyn, err := exec.LookPath("ls") // a dynamically linked system binary, if the host has one
		if err != nil || runtime.GOARCH != "amd64" {
			t.Skip("no amd64 ls")
		}
		if _, err := image.Build(image.Options{Binary: dyn}); !errors.Is(err, image.ErrDynamic) {
			t.Skipf("%s: %v (static on this host?)", dyn, err)
		}
	})
}

// TestWriteLayoutIndex checks that several platforms become one index.
func TestWriteLayoutIndex(t *testing.T) {
	amd := build(t, options(t))
	cf, err := amd.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.Architecture = "arm64" // stands in for an arm64 build, which would cost another compile
	arm, err := mutate.ConfigFile(amd, cf)
	if err != nil {
		t.Fatal(err)
	}
	oci := filepath.Join(t.TempDir(), "oci")
	top, err := image.WriteLayout(oci, testVersion, amd, arm)
	if err != nil {
		t.Fatal(err)
	}
	p, err := layout.FromPath(oci)
	if err != nil {
		t.Fatal(err)
	}
	outer, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	om, _ := outer.IndexManifest()
	if len(om.Manifests) != 1 || om.Manifests[0].Digest != top || om.Manifests[0].MediaType != types.OCIImageIndex {
		t.Fatalf("index.json %+v", om.Manifests)
	}
	inner, err := outer.ImageIndex(top)
	if err != nil {
		t.Fatal(err)
	}
	im, _ := inner.IndexManifest()
	var plats []string
	for _, d := range im.Manifests {
		plats = append(plats, d.Platform.String())
	}
	if !reflect.DeepEqual(plats, []string{"linux/amd64", "linux/arm64"}) {
		t.Fatalf("platforms %v", plats)
	}
}

func TestSourceDateEpoch(t *testing.T) {
	for env, want := range map[string]string{"": "1970-01-01T00:00:00Z", "1700000000": "2023-11-14T22:13:20Z", "x": "", "-1": ""} {
		t.Setenv("SOURCE_DATE_EPOCH", env)
		got, err := image.SourceDateEpoch()
		if (err != nil) != (want == "") || (err == nil && got.Format(time.RFC3339) != want) {
			t.Errorf("SOURCE_DATE_EPOCH=%q: %s, %v; want %q", env, got, err, want)
		}
	}
}

func TestTag(t *testing.T) {
	if tag, err := image.Tag(image.Repository, "v1.2.3-4-gabcdef-dirty"); err != nil || tag.String() != "ghcr.io/elasticctr/cube:v1.2.3-4-gabcdef-dirty" {
		t.Errorf("Tag = %v, %v", tag, err)
	}
	if _, err := image.Tag(image.Repository, "v1.2.3+build"); err == nil {
		t.Error("Tag accepted a '+'")
	}
}

func layerFiles(t *testing.T, img v1.Image) []*tar.Header {
	t.Helper()
	var hs []*tar.Header
	walkLayer(t, img, func(h *tar.Header, _ io.Reader) { hs = append(hs, h) })
	return hs
}

func fileBody(t *testing.T, img v1.Image, name string) []byte {
	t.Helper()
	var body []byte
	walkLayer(t, img, func(h *tar.Header, r io.Reader) {
		if h.Name == name {
			b, err := io.ReadAll(r)
			if err != nil {
				t.Fatal(err)
			}
			body = b
		}
	})
	if body == nil {
		t.Fatalf("%q not in the layer", name)
	}
	return body
}

func walkLayer(t *testing.T, img v1.Image, fn func(*tar.Header, io.Reader)) {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 {
		t.Fatalf("%d layers, want 1", len(layers))
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		fn(h, tr)
	}
}
