package loopback

import (
	"net"
	"testing"
)

// TestAllocatorNeverTwice: a port the kernel offers again (its probe closed, nothing listens yet)
// is not handed out twice.
func TestAllocatorNeverTwice(t *testing.T) {
	offered := []string{"127.0.0.1:4001", "127.0.0.1:4001", "127.0.0.1:4002", "127.0.0.1:4001", "127.0.0.1:4003"}
	a := NewAllocator(func() (string, error) {
		next := offered[0]
		offered = offered[1:]
		return next, nil
	})
	var got []string
	for range 3 {
		addr, err := a.Next()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, addr)
	}
	want := []string{"127.0.0.1:4001", "127.0.0.1:4002", "127.0.0.1:4003"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("handed out %v, want %v", got, want)
		}
	}
}

// TestAddrIsFreeAndUnique: the process's addresses are loopback, distinct, and free to listen on.
func TestAddrIsFreeAndUnique(t *testing.T) {
	seen := map[string]bool{}
	for range 20 {
		addr, err := Addr()
		if err != nil {
			t.Fatal(err)
		}
		if seen[addr] {
			t.Fatalf("%s handed out twice", addr)
		}
		seen[addr] = true
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("%s: %v", addr, err)
		}
		l.Close()
	}
}
