// Package version says which version a provider binary is, and so which cube image it
// defaults to: the one a release build stamps, else the one Go recorded when it built the
// binary (a module version from `go install …@v1.2.3`, or the git checkout a plain `go build`
// ran in). scripts/version.sh derives the same string for a checkout, for `make images`.
package version

import (
	"runtime/debug"
	"strings"

	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
)

// Dev is the version of a binary that carries none: built without -ldflags, outside a git
// checkout (or with -buildvcs=false), not from a module version. No image matches it.
const Dev = "dev"

// Current is this binary's version (Of with the build information Go embedded).
func Current(stamped string) string {
	info, _ := debug.ReadBuildInfo()
	return Of(stamped, info)
}

// revisionLength is how much of a commit hash names a development build: as much as a Go
// pseudo-version carries, so `go install …@<commit>` and a build in that checkout agree.
const revisionLength = 12

// Of is the version of a binary stamped with stamped (-X main.version; "" or "dev" when not)
// and built as info says:
//   - a stamped version wins (a release build: the tag without its "v");
//   - a module version that is a release (v1.2.3, not a pseudo-version, not +dirty): 1.2.3;
//   - a git checkout: the commit's first 12 hex digits, with "-dirty" when the tree had
//     changes (a pseudo-version without VCS information gives the same commit);
//   - otherwise Dev.
func Of(stamped string, info *debug.BuildInfo) string {
	if stamped != "" && stamped != Dev {
		return stamped
	}
	if info == nil {
		return Dev
	}
	v := info.Main.Version
	if semver.IsValid(v) && semver.Build(v) == "" && !module.IsPseudoVersion(v) {
		return strings.TrimPrefix(v, "v")
	}
	var rev, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev == "" && module.IsPseudoVersion(v) {
		rev, _ = module.PseudoVersionRev(v)
	}
	if len(rev) < revisionLength {
		return Dev
	}
	rev = rev[:revisionLength]
	if modified == "true" || strings.HasSuffix(semver.Build(v), "dirty") && modified == "" {
		rev += "-dirty"
	}
	return rev
}
