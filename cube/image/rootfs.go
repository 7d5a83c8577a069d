package image

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"time"
)

// The image's only layer, in tar order (parents first, then by name):
//
//	path         type  mode  uid:gid        why
//	cube         file  0755  65532:65532    the entrypoint
//	data/        dir   0755  65532:65532    working dir; dictionaries land here
//	etc/         dir   0755  0:0
//	etc/group    file  0644  0:0            root and nonroot, so tools show names
//	etc/passwd   file  0644  0:0            root and nonroot (home /data, no shell)
//
// Nothing else: no shell, no libc, no CA bundle (cube speaks no TLS today; a
// subcommand that does should link golang.org/x/crypto/x509roots/fallback).
// Every entry's mtime is Options.Created, names are relative without "./",
// the format is USTAR, so the same binary always gives the same bytes.
const (
	passwd = "root:x:0:0:root:/root:/sbin/nologin\n" +
		"nonroot:x:65532:65532:nonroot:/data:/sbin/nologin\n"
	group = "root:x:0:\n" +
		"nonroot:x:65532:\n"
)

// Sentinel errors of checkBinary.
var (
	ErrNotELF    = errors.New("not an ELF executable")
	ErrDynamic   = errors.New("dynamically linked (build with CGO_ENABLED=0)")
	ErrWrongArch = errors.New("built for another architecture")
)

// rootFS returns the uncompressed tar of the layer described above.
func rootFS(bin []byte, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	entry := func(name string, typ byte, mode int64, id int, body string) error {
		owner := "root"
		if id != 0 {
			owner = "nonroot"
		}
		h := &tar.Header{
			Typeflag: typ, Name: name, Mode: mode, Size: int64(len(body)),
			Uid: id, Gid: id, Uname: owner, Gname: owner,
			ModTime: mtime, Format: tar.FormatUSTAR,
		}
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("tar %q: %w", name, err)
		}
		if _, err := io.WriteString(tw, body); err != nil {
			return fmt.Errorf("tar %q: %w", name, err)
		}
		return nil
	}
	for _, e := range []struct {
		name string
		typ  byte
		mode int64
		id   int
		body string
	}{
		{"cube", tar.TypeReg, 0o755, UID, string(bin)},
		{"data/", tar.TypeDir, 0o755, UID, ""},
		{"etc/", tar.TypeDir, 0o755, 0, ""},
		{"etc/group", tar.TypeReg, 0o644, 0, group},
		{"etc/passwd", tar.TypeReg, 0o644, 0, passwd},
	} {
		if err := entry(e.name, e.typ, e.mode, e.id, e.body); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("tar: %w", err)
	}
	return buf.Bytes(), nil
}

// checkBinary refuses what would not start in a scratch image: anything but a
// statically linked linux ELF executable for arch.
func checkBinary(r io.ReaderAt, arch string) error {
	f, err := elf.NewFile(r)
	if err != nil {
		return ErrNotELF
	}
	defer f.Close()
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return ErrNotELF
	}
	want, ok := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[arch]
	if !ok {
		return fmt.Errorf("unsupported architecture %q (want amd64 or arm64)", arch)
	}
	if f.Machine != want {
		return fmt.Errorf("%w: %s, want %s (%s)", ErrWrongArch, f.Machine, want, arch)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return ErrDynamic
		}
	}
	return nil
}
