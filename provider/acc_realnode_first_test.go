package provider

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
)

// This file's name sorts before every other test file of the package: see TestAccRealNode.

// TestAccRealNode runs the end-to-end tests on the real node one after another, as subtests:
// the node is one machine's worth of capacity and RolloutUnderLookups measures under load.
// The group as a whole runs in parallel with the tests on kwok's simulated nodes, which
// never schedule a pod on the real node.
//
// It is the longest of the parallel tests (about 12 minutes), so it must start first: when
// the tests that run alone are done, the parallel ones take go test's -parallel slots about in
// the order they called t.Parallel, which is the order of their files' names and, in a file,
// of their functions. So this function is in the package's first test file, and first in it;
// in realnode_test.go it started after two thirds of the others, and ran alone at the end.
func TestAccRealNode(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		test func(*testing.T)
	}{
		{"TrainingToLookup", realNodeTrainingToLookup},
		{"PaddleSaveToLookup", realNodePaddleSaveToLookup},
		{"ServingPredicts", realNodeServingPredicts},
		{"RolloutUnderLookups", realNodeRolloutUnderLookups},
		{"Reshard", realNodeReshard},
		{"ReplicaComesBack", realNodeReplicaComesBack},
		{"DestroyLeavesNothing", realNodeDestroyLeavesNothing},
	} {
		t.Run(c.name, c.test)
	}
}

// TestRealNodeGroupComesFirst keeps TestAccRealNode first in the order go test runs the
// package's tests: this file first among the test files, and TestAccRealNode first in it.
func TestRealNodeGroupComesFirst(t *testing.T) {
	files, err := filepath.Glob("*_test.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("test files: %v %v", files, err)
	}
	slices.Sort(files)
	const this = "acc_realnode_first_test.go"
	if files[0] != this {
		t.Fatalf("%s sorts before %s, so its parallel tests would take -parallel slots before TestAccRealNode: rename one", files[0], this)
	}
	src, err := os.ReadFile(this)
	if err != nil {
		t.Fatal(err)
	}
	if first := regexp.MustCompile(`(?m)^func (Test\w+)\(`).FindSubmatch(src); first == nil || string(first[1]) != "TestAccRealNode" {
		t.Fatalf("the first test of %s is %q, want TestAccRealNode", this, first)
	}
}
