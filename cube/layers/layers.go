// Package layers opens a published version's shard as the cube serves it: with the chain of
// layered deltas under it, down to a version that holds every key (layout.Manifest.Layered).
package layers

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/elasticctr/terraform-provider-ctr/cube/dict"
	"github.com/elasticctr/terraform-provider-ctr/cube/layout"
)

// Max bounds the layers a version may be served with.
const Max = 64

// Chain returns the versions a version is served from, newest first: the
// version, then each Base of a layered manifest down to a version that
// holds every key.
func Chain(root, version string) ([]string, error) {
	chain := []string{version}
	for v := version; ; {
		m, err := layout.ReadManifest(root, v)
		if err != nil {
			return nil, fmt.Errorf("version %q: %w", v, err)
		}
		if !m.Layered {
			return chain, nil
		}
		switch {
		case len(chain) > Max:
			return nil, fmt.Errorf("version %q: more than %d layers", version, Max)
		case !layout.ValidVersion(m.Base) || strings.ContainsAny(m.Base, `/\`):
			return nil, fmt.Errorf("version %q: layered over %q, not a published version name", v, m.Base)
		}
		v = m.Base
		chain = append(chain, v)
	}
}

// Open opens shard of version under root with opts, and the same shard of
// every version of its chain.
func Open(root, version string, shard int, opts dict.Options) (*dict.Stack, error) {
	chain, err := Chain(root, version)
	if err != nil {
		return nil, err
	}
	ds := make([]*dict.Dict, 0, len(chain))
	fail := func(err error) (*dict.Stack, error) {
		for _, d := range ds {
			_ = d.Close()
		}
		return nil, err
	}
	for _, v := range chain {
		d, err := dict.Open(filepath.Join(root, v, layout.ShardFile(shard)), opts)
		if err != nil {
			return fail(err)
		}
		ds = append(ds, d)
	}
	st, err := dict.NewStack(ds[len(ds)-1], ds[:len(ds)-1]...)
	if err != nil {
		return fail(fmt.Errorf("version %q: %w", version, err))
	}
	return st, nil
}
