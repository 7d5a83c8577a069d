package image

import (
	"context"
	"fmt"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Push uploads what WriteLayout wrote at dir (one image, or a multi-platform
// index) to tag, with the credentials of the Docker config ($DOCKER_CONFIG,
// ~/.docker/config.json) for the tag's registry, and returns its digest: the
// same digest the layout holds, since nothing is rebuilt.
func Push(ctx context.Context, dir string, tag name.Tag, opts ...remote.Option) (v1.Hash, error) {
	p, err := layout.FromPath(dir)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("push %q: %w", dir, err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		return v1.Hash{}, fmt.Errorf("push %q: %w", dir, err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return v1.Hash{}, fmt.Errorf("push %q: %w", dir, err)
	}
	if len(im.Manifests) != 1 {
		return v1.Hash{}, fmt.Errorf("push %q: the layout holds %d entries, want the one WriteLayout writes", dir, len(im.Manifests))
	}
	desc := im.Manifests[0]
	opts = append([]remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)}, opts...)
	var entry remote.Taggable // the index, or the image, remote.Push uploads with all it names
	if desc.MediaType.IsIndex() {
		entry, err = idx.ImageIndex(desc.Digest)
	} else {
		entry, err = idx.Image(desc.Digest)
	}
	if err != nil {
		return v1.Hash{}, fmt.Errorf("push %q: %w", dir, err)
	}
	if err := remote.Push(tag, entry, opts...); err != nil {
		return v1.Hash{}, fmt.Errorf("push %s: %w", tag, err)
	}
	return desc.Digest, nil
}
