package image

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// RefNameAnnotation names an image in an OCI layout's index.json
// ("skopeo copy oci:DIR:<version>", "crane push DIR" use it).
const RefNameAnnotation = "org.opencontainers.image.ref.name"

// WriteLayout publishes imgs as an OCI image layout at dir, replacing what was
// there: it writes a sibling temp directory, then renames it into place, so a
// reader never sees half a layout. One image is referenced from index.json
// directly; several become one multi-platform index. Either way the entry is
// annotated with refName (the tag). It returns the entry's digest.
func WriteLayout(dir, refName string, imgs ...v1.Image) (v1.Hash, error) {
	if len(imgs) == 0 {
		return v1.Hash{}, fmt.Errorf("write layout %q: no images", dir)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "."+filepath.Base(dir)+"-")
	if err != nil {
		return v1.Hash{}, fmt.Errorf("write layout %q: %w", dir, err)
	}
	defer os.RemoveAll(tmp) // a no-op once renamed
	h, err := writeLayout(tmp, refName, imgs)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("write layout %q: %w", dir, err)
	}
	if err := os.Chmod(tmp, 0o755); err != nil { // MkdirTemp makes 0700
		return v1.Hash{}, fmt.Errorf("write layout %q: %w", dir, err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return v1.Hash{}, fmt.Errorf("write layout %q: %w", dir, err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return v1.Hash{}, fmt.Errorf("write layout %q: %w", dir, err)
	}
	return h, nil
}

func writeLayout(dir, refName string, imgs []v1.Image) (v1.Hash, error) {
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return v1.Hash{}, err
	}
	ref := layout.WithAnnotations(map[string]string{RefNameAnnotation: refName})
	if len(imgs) == 1 {
		plat, err := platform(imgs[0])
		if err != nil {
			return v1.Hash{}, err
		}
		if err := p.AppendImage(imgs[0], layout.WithPlatform(plat), ref); err != nil {
			return v1.Hash{}, err
		}
		return imgs[0].Digest()
	}
	idx, err := Index(imgs...)
	if err != nil {
		return v1.Hash{}, err
	}
	if err := p.AppendIndex(idx, ref); err != nil {
		return v1.Hash{}, err
	}
	return idx.Digest()
}

// Index groups per-platform images into one OCI image index.
func Index(imgs ...v1.Image) (v1.ImageIndex, error) {
	adds := make([]mutate.IndexAddendum, 0, len(imgs))
	for _, img := range imgs {
		plat, err := platform(img)
		if err != nil {
			return nil, err
		}
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &plat}})
	}
	return mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), adds...), nil
}

func platform(img v1.Image) (v1.Platform, error) {
	cf, err := img.ConfigFile()
	if err != nil {
		return v1.Platform{}, err
	}
	return v1.Platform{OS: cf.OS, Architecture: cf.Architecture}, nil
}

// WriteTarball writes img as a "docker load" tarball tagged tag, through a
// temp file renamed into place.
func WriteTarball(path string, tag name.Tag, img v1.Image) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-")
	if err != nil {
		return fmt.Errorf("write tarball %q: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	err = tarball.Write(tag, img, tmp)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("write tarball %q: %w", path, err)
	}
	return nil
}

// Tag is the tag for version in Repository, e.g. ghcr.io/elasticctr/cube:v1.2.0.
func Tag(repository, version string) (name.Tag, error) {
	t, err := name.NewTag(repository+":"+version, name.StrictValidation)
	if err != nil {
		return name.Tag{}, fmt.Errorf("version %q is not a valid image tag ([A-Za-z0-9_.-], at most 128): %w", version, err)
	}
	return t, nil
}
