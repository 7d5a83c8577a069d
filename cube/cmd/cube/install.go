package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/elasticctr/terraform-provider-ctr/cube/atomicfile"
	"github.com/elasticctr/terraform-provider-ctr/cube/bounded"
	"github.com/elasticctr/terraform-provider-ctr/cube/servingstandin"
)

// maxBinaryBytes bounds the executable install copies (the stripped static binary is ~20 MB).
const maxBinaryBytes = 512 << 20

// runInstall copies this binary into a directory, as the init container of a serving pod
// does: the serving container (Paddle's image, which has no cube) then runs
// DIR/cube serving. It also links DIR/paddle-serving-standin to it, the name under which the
// binary is the tests' stand-in for Paddle's server (used only where SERVING_BIN points there).
func runInstall(fs flagSet, stdout, stderr io.Writer) error {
	if err := fs.parse(); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errUsage
	}
	dir := fs.Arg(0)
	self, err := os.Executable()
	if err != nil {
		return err
	}
	bin, err := bounded.ReadFile(self, maxBinaryBytes)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	dst := filepath.Join(dir, installedName)
	if err := atomicfile.WriteFile(dst, bin, 0o755); err != nil {
		return err
	}
	link := filepath.Join(dir, servingstandin.BinaryName)
	tmp := link + ".tmp"
	_ = os.Remove(tmp)
	if err := os.Symlink(installedName, tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, link); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "installed %s (%d bytes)\n", dst, len(bin))
	return nil
}

// installedName is the binary's name in the install directory.
const installedName = "cube"
