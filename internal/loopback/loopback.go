// Package loopback hands out loopback addresses for servers a process is about to start:
// each is free when chosen and never handed out twice in the process.
package loopback

import (
	"net"
	"strconv"
	"sync"
)

// Allocator hands out addresses from pick, never the same one twice. A port free when chosen
// is free again once its probe closes, so the kernel may offer it twice before anything
// listens: a server given another's port then failed to listen while the other answered its
// health check (make bench's rollout once waited 10 minutes on "/agent/prepare 405").
type Allocator struct {
	pick func() (string, error)
	mu   sync.Mutex
	used map[string]bool
}

// NewAllocator hands out what pick offers, each address once.
func NewAllocator(pick func() (string, error)) *Allocator { return &Allocator{pick: pick} }

// Next is the next address pick offers that was not handed out before.
func (a *Allocator) Next() (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for {
		addr, err := a.pick()
		if err != nil {
			return "", err
		}
		if !a.used[addr] {
			if a.used == nil {
				a.used = map[string]bool{}
			}
			a.used[addr] = true
			return addr, nil
		}
	}
}

// probe is a loopback address nothing listens on at the time of the call.
func probe() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

var process = NewAllocator(probe)

// Addr is a free loopback address ("127.0.0.1:PORT"), never handed out before in this process.
func Addr() (string, error) { return process.Next() }

// Port is Addr's port.
func Port() (int, error) {
	addr, err := Addr()
	if err != nil {
		return 0, err
	}
	_, port, _ := net.SplitHostPort(addr)
	return strconv.Atoi(port)
}
