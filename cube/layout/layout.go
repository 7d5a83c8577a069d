// Package layout names the files of published dictionary versions on disk.
//
//	<root>/<version>/manifest.json      the build's Manifest, written last
//	<root>/<version>/shard-<i>.cube     shard i's dictionary (package dict)
//	<root>/<version>/shard-<i>.json     shard i's ShardManifest
//	<root>/.tmp-<version>-<random>      a build in progress, never served;
//	                                    flock'ed while its build runs (temp.go)
//
// A version directory appears by rename(2) only when complete, mode 0755
// with files 0644 so that servers running as another user can read it. Version names
// follow Paddle's cube: "<depend>" for a base, "<depend>_<build>" for a delta
// on top of base "<depend>", both decimal unix timestamps.
package layout

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ManifestName is the file that marks a version directory complete.
const ManifestName = "manifest.json"

// Manifest describes one published build.
type Manifest struct {
	Dict    string `json:"dict"`
	Version string `json:"version"`
	Depend  string `json:"depend"`         // the base version this one belongs to
	Mode    string `json:"mode"`           // "base" or "delta"
	Base    string `json:"base,omitempty"` // for a delta: the version it patches
	// Layered: this delta holds only its patch's keys and is served over
	// Base (itself layered or not); otherwise a delta holds every key.
	Layered    bool            `json:"layered,omitempty"`
	ShardCount int             `json:"shard_count"`
	Format     uint32          `json:"format"`
	Created    time.Time       `json:"created"`
	Input      string          `json:"input"`
	Records    int64           `json:"records"`     // records read from the input
	InputBytes int64           `json:"input_bytes"` // bytes of input files
	Shards     []ShardManifest `json:"shards"`
}

// ShardManifest describes one shard's dictionary file.
type ShardManifest struct {
	Dict       string `json:"dict"`
	Version    string `json:"version"`
	Shard      int    `json:"shard"`
	ShardCount int    `json:"shard_count"`
	File       string `json:"file"`
	Count      uint64 `json:"count"`
	Size       int64  `json:"size"`
	IndexSize  int64  `json:"index_size"`
	ValuesSize int64  `json:"values_size"`
	MaxValue   int    `json:"max_value"`
	SHA256     string `json:"sha256"`
}

// ShardFile is the dictionary file name of shard i.
func ShardFile(i int) string { return fmt.Sprintf("shard-%d.cube", i) }

// ShardManifestFile is the manifest file name of shard i.
func ShardManifestFile(i int) string { return fmt.Sprintf("shard-%d.json", i) }

// ReadManifest reads <root>/<version>/manifest.json.
func ReadManifest(root, version string) (*Manifest, error) {
	p := filepath.Join(root, version, ManifestName)
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("read manifest %q: %w", p, err)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("parse manifest %q: %w", p, err)
	}
	return &m, nil
}

// ParseVersion splits "<depend>" or "<depend>_<build>" into numbers; build
// equals depend for a base.
func ParseVersion(v string) (depend, build int64, ok bool) {
	a, b, delta := strings.Cut(v, "_")
	d, err := strconv.ParseInt(a, 10, 64)
	if err != nil {
		return 0, 0, false
	}
	if !delta {
		return d, d, true
	}
	n, err := strconv.ParseInt(b, 10, 64)
	if err != nil {
		return 0, 0, false
	}
	return d, n, true
}

// ValidVersion reports whether v is a version name as the transfer writes them: "<depend>"
// or "<depend>_<build>", each a number without sign or leading zeros.
func ValidVersion(v string) bool {
	d, b, ok := ParseVersion(v)
	if !ok || d < 0 || b < 0 {
		return false
	}
	want := strconv.FormatInt(d, 10)
	if strings.Contains(v, "_") {
		want += "_" + strconv.FormatInt(b, 10)
	}
	return v == want
}

// Versions lists the complete versions under root, oldest first (ordered
// by build time, then depend).
func Versions(root string) ([]string, error) {
	ents, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("list versions in %q: %w", root, err)
	}
	var vs []string
	for _, e := range ents {
		name := e.Name()
		if !e.IsDir() || strings.HasPrefix(name, ".") {
			continue
		}
		if _, _, ok := ParseVersion(name); !ok {
			continue
		}
		if _, err := os.Stat(filepath.Join(root, name, ManifestName)); err != nil {
			continue
		}
		vs = append(vs, name)
	}
	slices.SortFunc(vs, func(a, b string) int {
		ad, ab, _ := ParseVersion(a)
		bd, bb, _ := ParseVersion(b)
		if ab != bb {
			return cmpInt(ab, bb)
		}
		return cmpInt(ad, bd)
	})
	return vs, nil
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Newest returns the newest complete version under root that has shard i,
// or "" if there is none.
func Newest(root string, shard int) (string, error) {
	vs, err := Versions(root)
	if err != nil {
		return "", err
	}
	for j := len(vs) - 1; j >= 0; j-- {
		if _, err := os.Stat(filepath.Join(root, vs[j], ShardFile(shard))); err == nil {
			return vs[j], nil
		}
	}
	return "", nil
}
