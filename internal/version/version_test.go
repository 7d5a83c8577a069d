package version

import (
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

func TestOf(t *testing.T) {
	const rev = "26a9a1d5fee3b2c4d6e8f0a1b3c5d7e9f1a3b5c7"
	vcs := func(modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}
	}
	for _, tc := range []struct {
		name    string
		stamped string
		info    *debug.BuildInfo
		want    string
	}{
		{"release build", "1.2.3", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "1.2.3"},
		{"stamped wins over the checkout", "1.2.3", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261124130231-26a9a1d5fee3"}, Settings: vcs("false")}, "1.2.3"},
		{"go install at a release", "dev", &debug.BuildInfo{Main: debug.Module{Version: "v1.4.0"}}, "1.4.0"},
		{"go install at a pre-release", "", &debug.BuildInfo{Main: debug.Module{Version: "v0.1.0-rc.1"}}, "0.1.0-rc.1"},
		{"go install at a commit", "dev", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261124130231-26a9a1d5fee3"}}, "26a9a1d5fee3"},
		{"go build in a clean checkout", "dev", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.4-0.20261124130231-26a9a1d5fee3"}, Settings: vcs("false")}, "26a9a1d5fee3"},
		{"go build in a dirty checkout", "dev", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261124130231-26a9a1d5fee3+dirty"}, Settings: vcs("true")}, "26a9a1d5fee3-dirty"},
		{"go build at a tag, dirty", "dev", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3+dirty"}, Settings: vcs("true")}, "26a9a1d5fee3-dirty"},
		{"go build at a tag", "dev", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}, Settings: vcs("false")}, "1.2.3"},
		{"no VCS information", "dev", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, Dev},
		{"no build information", "", nil, Dev},
	} {
		if got := Of(tc.stamped, tc.info); got != tc.want {
			t.Errorf("%s: Of(%q, %+v) = %q, want %q", tc.name, tc.stamped, tc.info, got, tc.want)
		}
	}
}

// TestPlainBuildIsTheCheckoutVersion: a plain `go build` of the provider in this checkout is
// the version scripts/version.sh gives the checkout, which `make images` tags the cube image
// with; so the provider's default image is the image built here, never a moving :latest.
func TestPlainBuildIsTheCheckoutVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the provider")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output(); err != nil {
		t.Skipf("not a git checkout (%v): a build here carries no version, which TestOf covers", err)
	}
	script, err := exec.Command(filepath.Join(root, "scripts", "version.sh")).Output()
	if err != nil {
		t.Fatalf("scripts/version.sh: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "terraform-provider-ctr")
	build := exec.Command("go", "build", "-buildvcs=true", "-o", bin, ".")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatalf("go version -m: %v", err)
	}
	// `go version -m` prints "<file>: <go version>" and then BuildInfo.String(), indented.
	_, body, _ := strings.Cut(string(out), "\n")
	var lines []string
	for _, l := range strings.Split(body, "\n") {
		lines = append(lines, strings.TrimPrefix(l, "\t"))
	}
	info, err := debug.ParseBuildInfo(strings.Join(lines, "\n"))
	if err != nil {
		t.Fatalf("parse the build information: %v\n%s", err, out)
	}
	want := strings.TrimSpace(string(script))
	if got := Of("", info); got != want {
		t.Errorf("a plain go build is version %q, scripts/version.sh says %q\n%s", got, want, out)
	}
	if Of("", info) == Dev {
		t.Errorf("a plain go build in a checkout carries no version:\n%s", out)
	}
}
