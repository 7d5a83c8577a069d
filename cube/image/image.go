// Package image assembles the cube container image: one static binary in one
// layer, non-root, no shell, labelled, and byte-for-byte reproducible.
package image

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's fixed shape. The provider renders pods against these, so they
// change only together with internal/stack.
const (
	// UID and GID run the server and own /cube and /data (distroless "nonroot").
	UID, GID = 65532, 65532
	// BinaryPath is where the binary lives and the entrypoint.
	BinaryPath = "/cube"
	// DataDir is the working directory and where dictionaries are published.
	DataDir = "/data"
	// Repository is where release images are pushed.
	Repository = "ghcr.io/elasticctr/cube"
)

// Ports are the ports the image declares: the cube server (baidu_std and HTTP
// on one port), the transfer and the file server.
var Ports = []string{"8027/tcp", "8099/tcp", "8080/tcp"}

// Options describe one image. Only Binary is required.
type Options struct {
	// Binary is the path of a static (CGO_ENABLED=0) linux cube executable for
	// Arch. Build refuses a dynamically linked one or one for another machine:
	// either fails only at container start, with "no such file or directory".
	Binary string
	// Arch is the GOARCH of Binary and of the image: "amd64" or "arm64".
	// If blank, it defaults to "amd64".
	Arch string
	// Version is what "cube version" prints; it labels the image. If blank,
	// it defaults to "dev" (the binary's own default).
	Version string
	// Revision is the VCS commit. If blank, the label is left out.
	Revision string
	// Source is the repository URL. If blank, it defaults to DefaultSource.
	Source string
	// Licenses is an SPDX expression. If blank, it defaults to "NOASSERTION".
	Licenses string
	// Created stamps the config, the history, the labels and every file's
	// mtime. If zero, it defaults to $SOURCE_DATE_EPOCH, else the Unix epoch,
	// so that the same inputs give the same digest.
	Created time.Time
}

// DefaultSource is the repository the image is built from.
const DefaultSource = "https://github.com/elasticctr/terraform-provider-ctr"

// Build assembles the image described by opts. The result is an OCI image
// whose manifest annotations repeat its config labels.
func Build(opts Options) (v1.Image, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	bin, err := os.ReadFile(opts.Binary)
	if err != nil {
		return nil, fmt.Errorf("read binary: %w", err)
	}
	if err := checkBinary(bytes.NewReader(bin), opts.Arch); err != nil {
		return nil, fmt.Errorf("binary %q: %w", opts.Binary, err)
	}
	fs, err := rootFS(bin, opts.Created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(
		func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(fs)), nil },
		tarball.WithMediaType(types.OCILayer),
		tarball.WithCompressionLevel(9), // gzip.BestCompression: the layer is pulled far more often than built
	)
	if err != nil {
		return nil, fmt.Errorf("make layer: %w", err)
	}

	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History: v1.History{
			Created:   v1.Time{Time: opts.Created},
			CreatedBy: "cube/image " + opts.Version,
			Comment:   "static cube binary, /data, /etc/passwd and /etc/group",
		},
	})
	if err != nil {
		return nil, fmt.Errorf("append layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.Created = v1.Time{Time: opts.Created}
	cf.OS, cf.Architecture = "linux", opts.Arch
	cf.Config = config(opts)
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return nil, fmt.Errorf("set config: %w", err)
	}
	return mutate.Annotations(img, labels(opts)).(v1.Image), nil
}

// config is the runtime configuration. Cmd is a server that works as is in a
// container: "cube server" alone refuses to start without --data and listens
// on loopback only. Pods override the arguments anyway.
func config(opts Options) v1.Config {
	ports := make(map[string]struct{}, len(Ports))
	for _, p := range Ports {
		ports[p] = struct{}{}
	}
	return v1.Config{
		Entrypoint:   []string{BinaryPath},
		Cmd:          []string{"server", "--data", DataDir, "--listen", ":8027"},
		User:         strconv.Itoa(UID) + ":" + strconv.Itoa(GID),
		WorkingDir:   DataDir,
		Env:          []string{"PATH=/"}, // the only directory with an executable; lets pods say "cube"
		ExposedPorts: ports,
		Labels:       labels(opts),
	}
}

// labels are the OCI annotations, used both as config labels (docker inspect)
// and as manifest annotations (registries).
func labels(opts Options) map[string]string {
	l := map[string]string{
		"org.opencontainers.image.title":       "cube",
		"org.opencontainers.image.description": "cube, the sparse-parameter engine for Paddle Serving: build, serve and query sharded dictionaries",
		"org.opencontainers.image.version":     opts.Version,
		"org.opencontainers.image.source":      opts.Source,
		"org.opencontainers.image.licenses":    opts.Licenses,
		"org.opencontainers.image.created":     opts.Created.UTC().Format(time.RFC3339),
	}
	if opts.Revision != "" {
		l["org.opencontainers.image.revision"] = opts.Revision
	}
	return l
}

func (o Options) withDefaults() (Options, error) {
	if o.Binary == "" {
		return o, fmt.Errorf("no binary: Options.Binary is required")
	}
	if o.Arch == "" {
		o.Arch = "amd64"
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	if o.Source == "" {
		o.Source = DefaultSource
	}
	if o.Licenses == "" {
		o.Licenses = "NOASSERTION"
	}
	if o.Created.IsZero() {
		t, err := SourceDateEpoch()
		if err != nil {
			return o, err
		}
		o.Created = t
	}
	o.Created = o.Created.UTC()
	return o, nil
}

// SourceDateEpoch is the time reproducible builds stamp: $SOURCE_DATE_EPOCH
// (https://reproducible-builds.org/specs/source-date-epoch/) if set, else the
// Unix epoch.
func SourceDateEpoch() (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	sec, err := strconv.ParseInt(s, 10, 64)
	if err != nil || sec < 0 {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH %q is not a non-negative number of seconds", s)
	}
	return time.Unix(sec, 0).UTC(), nil
}
