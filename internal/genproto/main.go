// Command genproto turns the project's .proto files into Go, as protoc would: bufbuild's
// protocompile (pure Go, pinned in go.mod) parses them, and the official protoc-gen-go of
// the protobuf module go.mod pins generates the code from the request protoc would send it.
// No protoc binary is needed, and the output depends only on go.mod.
//
//	go run ./internal/genproto DIR...   regenerates DIR/*.pb.go from DIR/*.proto
//	go run ./internal/genproto -check DIR...   fails if a .pb.go is not what DIR/*.proto give
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/pluginpb"
)

func main() {
	check := flag.Bool("check", false, "report stale generated files instead of writing them")
	flag.Parse()
	stale := false
	for _, dir := range flag.Args() {
		s, err := generate(dir, *check)
		if err != nil {
			fmt.Fprintf(os.Stderr, "genproto %s: %v\n", dir, err)
			os.Exit(1)
		}
		stale = stale || s
	}
	if stale {
		fmt.Fprintln(os.Stderr, "genproto: generated Go is stale: run make generate and commit the result")
		os.Exit(1)
	}
}

// generate compiles dir's .proto files and writes (or, with check, compares) their .pb.go.
func generate(dir string, check bool) (stale bool, err error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.proto"))
	if err != nil || len(names) == 0 {
		return false, fmt.Errorf("no .proto files (%v)", err)
	}
	for i := range names {
		names[i] = filepath.Base(names[i])
	}
	sort.Strings(names)
	c := protocompile.Compiler{Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{ImportPaths: []string{dir}})}
	files, err := c.Compile(context.Background(), names...)
	if err != nil {
		return false, err
	}
	req := &pluginpb.CodeGeneratorRequest{FileToGenerate: names, Parameter: proto.String("paths=source_relative")}
	// Every file the request names comes after the files it imports, as protoc sends them.
	seen := map[string]bool{}
	var add func(f protoreflect.FileDescriptor)
	add = func(f protoreflect.FileDescriptor) {
		if seen[f.Path()] {
			return
		}
		seen[f.Path()] = true
		for i := range f.Imports().Len() {
			add(f.Imports().Get(i).FileDescriptor)
		}
		req.ProtoFile = append(req.ProtoFile, protodesc.ToFileDescriptorProto(f))
	}
	for _, f := range files {
		add(f)
	}
	in, err := proto.Marshal(req)
	if err != nil {
		return false, err
	}
	cmd := exec.Command("go", "run", "google.golang.org/protobuf/cmd/protoc-gen-go")
	cmd.Stdin, cmd.Stderr = bytes.NewReader(in), os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return false, fmt.Errorf("protoc-gen-go: %w", err)
	}
	var resp pluginpb.CodeGeneratorResponse
	if err := proto.Unmarshal(out, &resp); err != nil {
		return false, err
	}
	if resp.Error != nil {
		return false, fmt.Errorf("protoc-gen-go: %s", resp.GetError())
	}
	for _, f := range resp.File {
		path := filepath.Join(dir, f.GetName())
		if check {
			have, _ := os.ReadFile(path)
			if !bytes.Equal(have, []byte(f.GetContent())) {
				fmt.Fprintf(os.Stderr, "genproto: %s is stale\n", path)
				stale = true
			}
			continue
		}
		if err := os.WriteFile(path, []byte(f.GetContent()), 0o644); err != nil {
			return false, err
		}
		fmt.Println("wrote", path)
	}
	return stale, nil
}
