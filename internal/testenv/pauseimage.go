package testenv

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"runtime"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// PauseImage is the sandbox image of the real node: containerd's sandbox_image names it, and
// testenv imports it before kubelet starts, so containerd never tries to pull it.
const PauseImage = "localhost/ctr-testenv/pause:1"

// writePauseImage packs the static pause binary into a one-layer image and writes it as a
// docker-archive tarball that `ctr images import` reads.
func writePauseImage(bin, out string) error {
	body, err := os.ReadFile(bin)
	if err != nil {
		return err
	}
	var layerTar bytes.Buffer
	tw := tar.NewWriter(&layerTar)
	if err := tw.WriteHeader(&tar.Header{Name: "pause", Mode: 0o755, Size: int64(len(body)), Typeflag: tar.TypeReg, Format: tar.FormatUSTAR}); err != nil {
		return err
	}
	if _, err := tw.Write(body); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar.Bytes())), nil
	})
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Config = v1.Config{Entrypoint: []string{"/pause"}, User: "65535:65535"}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return err
	}
	tag, err := name.NewTag(PauseImage)
	if err != nil {
		return err
	}
	if err := tarball.WriteToFile(out, tag, img); err != nil {
		return fmt.Errorf("write pause image: %w", err)
	}
	return nil
}

// imageNames reads the names (RepoTags) a docker-archive image tarball carries.
func imageNames(path string) ([]string, error) {
	m, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(path) })
	if err != nil {
		return nil, fmt.Errorf("read image tarball %s: %w", path, err)
	}
	var names []string
	for _, d := range m {
		names = append(names, d.RepoTags...)
	}
	return names, nil
}
