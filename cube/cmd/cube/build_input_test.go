package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/colinmarc/sequencefile"

	"github.com/elasticctr/terraform-provider-ctr/cube/layout"
	"github.com/elasticctr/terraform-provider-ctr/cube/pipeline"
	"github.com/elasticctr/terraform-provider-ctr/cube/seqfile"
)

// buildRun is the outcome of one real "cube build" process.
type buildRun struct {
	code           int
	stdout, stderr string
	maxRSS         int64 // bytes
}

// buildProc runs "cube build args..." to its end (at most a minute).
func buildProc(t *testing.T, args ...string) buildRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, cubeBin, append([]string{"build"}, args...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	_ = cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("cube build %s: did not finish within a minute", strings.Join(args, " "))
	}
	r := buildRun{code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.maxRSS = ru.Maxrss << 10 // KiB on Linux
	}
	return r
}

// wantRefused checks that a build failed with a reader error naming file,
// and published nothing (no version, no leftover temporary directory).
func wantRefused(t *testing.T, r buildRun, out, file, reason string) {
	t.Helper()
	if r.code != 1 || strings.Contains(r.stderr, "panic") {
		t.Fatalf("exit %d, want 1 (an error, not a panic or success)\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	at := regexp.MustCompile(regexp.QuoteMeta(fmt.Sprintf("sequencefile %q at byte ", file)) + `\d+: `)
	if file != "" && !at.MatchString(r.stderr) || !strings.Contains(r.stderr, reason) {
		t.Fatalf("stderr %q: want `sequencefile %q at byte N:` and %q", r.stderr, file, reason)
	}
	ents, _ := os.ReadDir(out)
	for _, e := range ents {
		t.Errorf("output holds %q after a failed build", e.Name())
	}
}

// hadoopFile writes n records as a compressed Hadoop SequenceFile with
// small blocks (about 40 records each) and returns its bytes and header.
func hadoopFile(t *testing.T, path string, comp sequencefile.Compression, codec sequencefile.CompressionCodec, n int) ([]byte, seqfile.Header) {
	t.Helper()
	var b bytes.Buffer
	w, err := sequencefile.NewWriter(&sequencefile.WriterConfig{
		Writer: &b, KeyClass: sequencefile.LongWritableClassName, ValueClass: sequencefile.BytesWritableClassName,
		Compression: comp, CompressionCodec: codec, BlockSize: 2000,
	})
	if err != nil {
		t.Fatal(err)
	}
	for k := range uint64(n) {
		if err := w.Append(int64(k), pipeline.Value(k, 1, 40)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	rd, err := seqfile.NewReader(bytes.NewReader(b.Bytes()), path, seqfile.Options{})
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, b.Bytes())
	return b.Bytes(), rd.Header
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// blockAt returns the offset of the i-th block (from 0): its sync escape.
func blockAt(t *testing.T, data []byte, h seqfile.Header, i int) int {
	t.Helper()
	esc := append([]byte{0xff, 0xff, 0xff, 0xff}, h.Sync[:]...)
	off := int(h.Size)
	for ; i > 0; i-- {
		n := bytes.Index(data[off+1:], esc)
		if n < 0 {
			t.Fatalf("file has fewer blocks than asked")
		}
		off += 1 + n
	}
	return off
}

// recordEnd returns the offset where record n (from 1) of a file ends.
func recordEnd(t *testing.T, data []byte, n int) int {
	t.Helper()
	rd, err := seqfile.NewReader(bytes.NewReader(data), "mem", seqfile.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for range n {
		if _, _, err := rd.Next(); err != nil {
			t.Fatal(err)
		}
	}
	return int(rd.Offset())
}

// vint encodes v as a Hadoop VInt.
func vint(v int64) []byte {
	if v >= -112 && v <= 127 {
		return []byte{byte(v)}
	}
	first := int64(-112)
	if v < 0 {
		v, first = ^v, -120
	}
	var be [8]byte
	binary.BigEndian.PutUint64(be[:], uint64(v))
	rest := bytes.TrimLeft(be[:], "\x00")
	return append([]byte{byte(first - int64(len(rest)))}, rest...)
}

// TestBuildRefusesCorruptCompressed: a compressed file with one corrupt
// length, or cut inside a record, fails the build with the file and the
// byte offset. cube build used to exit 0 with the records before the damage
// (3 of 1,000 here) and the transfer would have rolled that model out.
func TestBuildRefusesCorruptCompressed(t *testing.T) {
	codecs := map[string]sequencefile.CompressionCodec{"gzip": sequencefile.GzipCompression, "snappy": sequencefile.SnappyCompression}
	for name, codec := range codecs {
		t.Run("block-"+name+"/negative-section-length", func(t *testing.T) {
			dir := t.TempDir()
			in := filepath.Join(dir, "in", "part-r-00000")
			data, h := hadoopFile(t, in, sequencefile.BlockCompression, codec, 1000)
			// The 4th block's key-lengths length becomes -7 (a one-byte VInt).
			at := blockAt(t, data, h, 3) + 4 + 16
			at += len(vint(int64(int8(data[at])))) // skip the record count (< 128: one byte)
			data[at] = byte(0xf9)
			writeFile(t, in, data)
			out := filepath.Join(dir, "out")
			wantRefused(t, buildProc(t, "--input", filepath.Dir(in), "--output", out, "--shards", "2", "--dict", "d"), out, in, "compressed length -7 out of range")
		})
		t.Run("record-"+name+"/cut-inside-a-length", func(t *testing.T) {
			dir := t.TempDir()
			in := filepath.Join(dir, "in", "part-r-00000")
			data, _ := hadoopFile(t, in, sequencefile.RecordCompression, codec, 1000)
			writeFile(t, in, data[:recordEnd(t, data, 3)+2])
			out := filepath.Join(dir, "out")
			wantRefused(t, buildProc(t, "--input", filepath.Dir(in), "--output", out, "--shards", "2", "--dict", "d"), out, in, "truncated record length")
		})
	}
}

// TestBuildSurvivesHostileCompressed: small hostile files that lie about
// counts and sizes fail the build with an error, never a panic, and never
// take memory for what they claim. They used to panic inside the library
// (a negative block record count reached make()), which in the transfer,
// where builds run in-process, killed it on every restart; the bomb was
// decompressed whole.
func TestBuildSurvivesHostileCompressed(t *testing.T) {
	dir := t.TempDir()
	_, h := hadoopFile(t, filepath.Join(dir, "template"), sequencefile.BlockCompression, sequencefile.GzipCompression, 1)
	tmpl, _ := os.ReadFile(filepath.Join(dir, "template"))
	header := tmpl[:h.Size]
	block := func(records int64, sections ...[]byte) []byte {
		b := append(append(bytes.Clone(header), 0xff, 0xff, 0xff, 0xff), h.Sync[:]...)
		b = append(b, vint(records)...)
		for _, s := range sections {
			b = append(append(b, vint(int64(len(s)))...), s...)
		}
		return b
	}
	gz := func(data []byte) []byte {
		var b bytes.Buffer
		w := gzip.NewWriter(&b)
		w.Write(data)
		w.Close()
		return b.Bytes()
	}
	// 512 MiB of zeros as the values of a one-record block: 500 kB on disk.
	var bomb bytes.Buffer
	w, _ := gzip.NewWriterLevel(&bomb, gzip.BestCompression)
	zeros := make([]byte, 1<<20)
	for range 512 {
		w.Write(zeros)
	}
	w.Close()
	cases := []struct {
		name, reason string
		data         []byte
	}{
		{"negative-record-count", "block record count -5 out of range", block(-5, gz([]byte{8}))},
		{"huge-record-count", "block record count 4294967296 out of range", block(1<<32, gz([]byte{8}))},
		{"negative-section-length", "compressed length -7 out of range", append(block(1), vint(-7)...)},
		{"count-beyond-lengths", "key lengths: 1 of 1000 records", block(1000, gz([]byte{8}), gz(make([]byte, 8)), gz([]byte{44}), gz(make([]byte, 44)))},
		{"gzip-bomb", "decompresses to more than the limit", block(1, gz([]byte{8}), gz(make([]byte, 8)), gz([]byte{4}), bomb.Bytes())},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := filepath.Join(t.TempDir(), "in", "part-r-00000")
			writeFile(t, in, c.data)
			out := filepath.Join(filepath.Dir(filepath.Dir(in)), "out")
			r := buildProc(t, "--input", filepath.Dir(in), "--output", out, "--shards", "1", "--dict", "d")
			wantRefused(t, r, out, in, c.reason)
			// The default --max-block is 128 MiB; growing the buffer to it
			// holds up to 1.5 times that for a moment, and the Go heap
			// returns freed memory lazily (measured: 285 MiB). Decompressing
			// the whole bomb, as the build used to, takes over 512 MiB.
			if r.maxRSS > 400<<20 {
				t.Errorf("a %d-byte file took %d MiB of memory", len(c.data), r.maxRSS>>20)
			}
			t.Logf("%d bytes, max RSS %d MiB: %s", len(c.data), r.maxRSS>>20, strings.TrimSpace(r.stderr))
		})
	}
}

// TestBuildRefusesEmptyInput: an input with no record at all would publish
// a model where every key misses; cube build refuses it unless told
// --allow-empty. It used to publish it.
func TestBuildRefusesEmptyInput(t *testing.T) {
	dir := t.TempDir()
	paddleHeaderOnly := filepath.Join(dir, "paddle", "part-00000")
	writePaddle(t, filepath.Dir(paddleHeaderOnly), 1, nil, nil)
	hadoopHeaderOnly := filepath.Join(dir, "hadoop", "part-r-00000")
	hadoopFile(t, hadoopHeaderOnly, sequencefile.BlockCompression, sequencefile.GzipCompression, 0)
	emptyDir := filepath.Join(dir, "empty")
	writeFile(t, filepath.Join(emptyDir, "_SUCCESS"), nil)
	for _, in := range []string{filepath.Dir(paddleHeaderOnly), filepath.Dir(hadoopHeaderOnly), emptyDir} {
		t.Run(filepath.Base(in), func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			args := []string{"--input", in, "--output", out, "--shards", "2", "--dict", "d"}
			wantRefused(t, buildProc(t, args...), out, "", "no records: refusing to publish a model where every key misses")
			r := buildProc(t, append(args, "--allow-empty")...)
			if r.code != 0 {
				t.Fatalf("--allow-empty: exit %d: %s", r.code, r.stderr)
			}
			m, err := layout.ReadManifest(out, strings.TrimSpace(r.stdout))
			if err != nil || m.Records != 0 || len(m.Shards) != 2 {
				t.Fatalf("manifest %+v, %v", m, err)
			}
		})
	}
}

// startBlockedBuild starts "cube build" reading a FIFO, so that it stays in
// the middle of its build (its .tmp directory created) until the test
// writes the input; it returns the process and the FIFO's path.
func startBlockedBuild(t *testing.T, out, version string) (*exec.Cmd, string) {
	t.Helper()
	fifo := filepath.Join(t.TempDir(), "part-fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(cubeBin, "build", "--input", fifo, "--output", out, "--shards", "2", "--dict", "d", "--version", version)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for len(tmpDirs(t, out)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the build never created its temporary directory")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return cmd, fifo
}

func tmpDirs(t *testing.T, out string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(out, ".tmp-*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// checkModes checks that a published version is readable by everyone:
// 0755 directory, 0644 files (it used to be a 0700 directory).
func checkModes(t *testing.T, out, version string) {
	t.Helper()
	dir := filepath.Join(out, version)
	st, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o755 {
		t.Errorf("%s: mode %v, want 0755", dir, st.Mode().Perm())
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		info, _ := e.Info()
		if info.Mode().Perm() != 0o644 {
			t.Errorf("%s: mode %v, want 0644", e.Name(), info.Mode().Perm())
		}
	}
}

// TestBuildRemovesKilledBuilds: a build killed with SIGKILL leaves its
// .tmp directory behind; the next build in the same output removes it.
func TestBuildRemovesKilledBuilds(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	killed, _ := startBlockedBuild(t, out, "1700000000")
	stale := tmpDirs(t, out)
	if err := killed.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = killed.Wait()
	if got := tmpDirs(t, out); len(got) != 1 || got[0] != stale[0] {
		t.Fatalf("after the kill: %v, want %v", got, stale)
	}
	writePaddle(t, filepath.Join(dir, "in"), 1, []uint64{1, 2, 3}, func(k uint64) []byte { return pipeline.Value(k, 1, 8) })
	version := strings.TrimSpace(cube(t, "build", "--input", filepath.Join(dir, "in"), "--output", out, "--shards", "2", "--dict", "d"))
	if got := tmpDirs(t, out); len(got) != 0 {
		t.Fatalf("the next build left %v", got)
	}
	checkModes(t, out, version)
}

// TestBuildKeepsConcurrentBuilds: a build running while another starts in
// the same output keeps its .tmp directory and publishes.
func TestBuildKeepsConcurrentBuilds(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	slow, fifo := startBlockedBuild(t, out, "1700000000")
	writePaddle(t, filepath.Join(dir, "in"), 1, []uint64{1, 2, 3}, func(k uint64) []byte { return pipeline.Value(k, 1, 8) })
	cube(t, "build", "--input", filepath.Join(dir, "in"), "--output", out, "--shards", "2", "--dict", "d", "--version", "1700000001")
	if got := tmpDirs(t, out); len(got) != 1 {
		t.Fatalf("the running build's directory is gone: %v", got)
	}
	// Now let the first build read its input and finish.
	f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	src, _ := os.ReadFile(filepath.Join(dir, "in", "part-00000"))
	if _, err := io.Copy(f, bytes.NewReader(src)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := slow.Wait(); err != nil {
		t.Fatalf("the first build: %v", err)
	}
	for _, v := range []string{"1700000000", "1700000001"} {
		checkModes(t, out, v)
	}
	if got := tmpDirs(t, out); len(got) != 0 {
		t.Fatalf("left %v", got)
	}
}
