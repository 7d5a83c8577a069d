package image

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// CubePackage is the main package of the cube binary.
const CubePackage = "github.com/elasticctr/terraform-provider-ctr/cube/cmd/cube"

// BuildBinary compiles a static, stripped, reproducible linux/arch cube at out,
// with "cube version" printing version (-X main.version, see cube/cmd/cube).
// It runs "go" from PATH and must run inside this module.
func BuildBinary(ctx context.Context, arch, version, out string) error {
	if strings.ContainsAny(version, " \t\n'\"") {
		return fmt.Errorf("build cube: version %q contains a space or quote", version)
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath",
		"-ldflags", "-s -w -X main.version="+version, "-o", out, CubePackage)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build cube for linux/%s: %w\n%s", arch, err, b)
	}
	return nil
}
