// Command build-image writes the cube container image, without a Docker
// daemon or network: an OCI image layout (DIR/oci) and a "docker load"
// tarball (DIR/cube-image.tar).
//
//	go run ./cube/image/cmd/build-image --version V --revision R --out DIR [--binary PATH] [--binary-arm64 PATH | --arm64]
//
// Without --binary it compiles a static cube itself (go in PATH; run inside
// the module). The layout holds every platform built; the tarball holds the
// linux/amd64 image, tagged <repository>:<version>.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/image"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(os.Stderr, "build-image: %v\n", err)
		}
		os.Exit(2)
	}
}

type flags struct {
	binary, binaryARM64 string
	arm64               bool
	version, revision   string
	source, licenses    string
	repository, out     string
	push                bool
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var f flags
	fs := flag.NewFlagSet("build-image", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.binary, "binary", "", "static linux/amd64 cube `path` (default: build one)")
	fs.StringVar(&f.binaryARM64, "binary-arm64", "", "static linux/arm64 cube `path`; adds a linux/arm64 image")
	fs.BoolVar(&f.arm64, "arm64", false, "also build a linux/arm64 cube and image")
	fs.StringVar(&f.version, "version", "dev", "`version` that \"cube version\" prints; the image tag")
	fs.StringVar(&f.revision, "revision", "", "VCS `commit` for the revision label")
	fs.StringVar(&f.source, "source", image.DefaultSource, "source repository `URL` for the source label")
	fs.StringVar(&f.licenses, "licenses", "", "SPDX `expression` for the licenses label (default NOASSERTION)")
	fs.StringVar(&f.repository, "repository", image.Repository, "`repository` of the tarball's tag")
	fs.StringVar(&f.out, "out", "", "output `directory` (required)")
	fs.BoolVar(&f.push, "push", false, "then push the OCI layout (every platform built) to <repository>:<version>, with the credentials of ~/.docker/config.json ($DOCKER_CONFIG)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if f.out == "" || fs.NArg() > 0 {
		fs.Usage()
		return errors.New("--out is required and there are no arguments")
	}
	return build(ctx, f, stdout)
}

func build(ctx context.Context, f flags, stdout io.Writer) error {
	tag, err := image.Tag(f.repository, f.version)
	if err != nil {
		return err
	}
	created, err := image.SourceDateEpoch()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(f.out, 0o755); err != nil {
		return err
	}
	binaries := map[string]string{"amd64": f.binary}
	if f.binaryARM64 != "" || f.arm64 {
		binaries["arm64"] = f.binaryARM64
	}
	var imgs []v1.Image
	for _, arch := range []string{"amd64", "arm64"} {
		bin, ok := binaries[arch]
		if !ok {
			continue
		}
		if bin == "" {
			bin = filepath.Join(f.out, "cube-linux-"+arch)
			start := time.Now()
			if err := image.BuildBinary(ctx, arch, f.version, bin); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "built %s in %s\n", bin, time.Since(start).Round(time.Millisecond))
		}
		img, err := image.Build(image.Options{
			Binary: bin, Arch: arch, Version: f.version, Revision: f.revision,
			Source: f.source, Licenses: f.licenses, Created: created,
		})
		if err != nil {
			return err
		}
		if err := report(stdout, "linux/"+arch, img); err != nil {
			return err
		}
		imgs = append(imgs, img)
	}

	oci := filepath.Join(f.out, "oci")
	digest, err := image.WriteLayout(oci, f.version, imgs...)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s/  %s:%s  %s\n", oci, tag.Context(), tag.TagStr(), digest)

	tarPath := filepath.Join(f.out, "cube-image.tar")
	if err := image.WriteTarball(tarPath, tag, imgs[0]); err != nil {
		return err
	}
	st, err := os.Stat(tarPath)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s  %s  %d bytes  (docker load -i %s)\n", tarPath, tag, st.Size(), tarPath)
	if !f.push {
		return nil
	}
	fmt.Fprintf(stdout, "pushing %s ...\n", tag)
	pushed, err := image.Push(ctx, oci, tag)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "pushed %s@%s\n", tag, pushed)
	return nil
}

// report prints one image's digest and sizes: the compressed bytes a pull
// fetches, and the uncompressed bytes it unpacks to.
func report(w io.Writer, platform string, img v1.Image) error {
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	var pull, unpacked int64
	for _, l := range layers {
		n, err := l.Size()
		if err != nil {
			return err
		}
		pull += n
		rc, err := l.Uncompressed()
		if err != nil {
			return err
		}
		m, err := io.Copy(io.Discard, rc)
		rc.Close()
		if err != nil {
			return err
		}
		unpacked += m
	}
	for _, raw := range []func() ([]byte, error){img.RawManifest, img.RawConfigFile} {
		b, err := raw()
		if err != nil {
			return err
		}
		pull += int64(len(b))
	}
	fmt.Fprintf(w, "%-12s %s  pull %s  unpacked %s\n", platform, digest, mib(pull), mib(unpacked))
	return nil
}

func mib(n int64) string { return fmt.Sprintf("%.2f MiB (%d bytes)", float64(n)/(1<<20), n) }
