package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/elasticctr/terraform-provider-ctr/cube/build"
	"github.com/elasticctr/terraform-provider-ctr/cube/seqfile"
)

// inputFlags are how the builder reads its input, for both `cube build`
// and the builds of `cube transfer`.
func inputFlags(fs *flag.FlagSet, seq *seqfile.Options, allowEmpty *bool) {
	fs.BoolVar(&seq.KeyBigEndian, "key-big-endian", false, "decode 12-byte BytesWritable keys as big-endian (Java order) instead of little-endian")
	fs.IntVar(&seq.MaxRecord, "max-record", seqfile.DefaultMaxRecord, "largest record in `bytes`, as stored and once decompressed (also each key and value of a block)")
	fs.IntVar(&seq.MaxBlock, "max-block", seqfile.DefaultMaxBlock, "largest decompressed block of a block-compressed file in `bytes` (a build holds up to about twice this at once)")
	fs.BoolVar(allowEmpty, "allow-empty", false, "publish a model even if the input holds no record at all (every key would miss); refused by default")
}

func runBuild(fs flagSet, stdout, stderr io.Writer) error {
	var o build.Options
	fs.StringVar(&o.Input, "input", "", "SequenceFile `file or directory` (part files, read recursively; names starting with . or _ are skipped)")
	fs.StringVar(&o.Output, "output", "", "`directory` of published versions; the new one appears there as <version>/ by rename")
	fs.IntVar(&o.Shards, "shards", 0, "number of shards `N`; a key goes to shard key % N")
	fs.StringVar(&o.Dict, "dict", "", "dictionary `name` (cube.conf dict_name)")
	fs.StringVar(&o.Base, "base", "", "make a delta: the base `VERSION` under --output that this input patches (upsert)")
	fs.BoolVar(&o.Layered, "layered", false, "with --base: write only the input's keys, a layer served over the base (which may be layered itself), instead of base + input in full")
	fs.StringVar(&o.Version, "version", "", "version name (default <unix seconds>, or <depend>_<unix seconds> for a delta)")
	inputFlags(fs.FlagSet, &o.Seq, &o.AllowEmpty)
	newLogger := logFlag(fs, logLevelHelp)
	if err := fs.parse(); err != nil {
		return err
	}
	o.Log = newLogger(stderr)
	m, err := build.Build(o)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s\n", m.Version)
	return nil
}
