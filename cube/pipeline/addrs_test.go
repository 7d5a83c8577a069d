package pipeline

import (
	"testing"
)

// TestAddrsNeverTwice: a port the kernel offers again (its probe closed, nothing listens yet)
// is not handed out twice.
func TestAddrsNeverTwice(t *testing.T) {
	offered := []string{"127.0.0.1:4001", "127.0.0.1:4001", "127.0.0.1:4002", "127.0.0.1:4001", "127.0.0.1:4003"}
	a := &addrs{pick: func() (string, error) {
		next := offered[0]
		offered = offered[1:]
		return next, nil
	}}
	var got []string
	for range 3 {
		addr, err := a.next()
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
