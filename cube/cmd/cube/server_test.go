package main

import (
	"io"
	"strings"
	"testing"
)

// TestProbeListenRefused: a --probe-listen that is no HOST:PORT, has no numeric port, is
// --listen's own address or cannot be listened on stops the server with an error naming
// the flag.
func TestProbeListenRefused(t *testing.T) {
	server, ok := find(commands(), "server")
	if !ok {
		t.Fatal("no server command")
	}
	data := t.TempDir()
	for _, tc := range []struct{ listen, probe, want string }{
		{"127.0.0.1:8027", "127.0.0.1", `--probe-listen "127.0.0.1": want HOST:PORT`},
		{"127.0.0.1:8027", "127.0.0.1:http", `--probe-listen "127.0.0.1:http": the port must be a number`},
		{"127.0.0.1:8027", "127.0.0.1:70000", `--probe-listen "127.0.0.1:70000": the port must be a number`},
		{"127.0.0.1:8027", "127.0.0.1:8027", `--probe-listen "127.0.0.1:8027" is --listen's address`},
		// TEST-NET-1: no address of this machine.
		{"127.0.0.1:0", "192.0.2.1:8028", `--probe-listen: listen tcp 192.0.2.1:8028`},
	} {
		err := server.call([]string{"--data", data, "--listen", tc.listen, "--probe-listen", tc.probe}, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("--listen %s --probe-listen %s: err = %v, want %q", tc.listen, tc.probe, err, tc.want)
		}
	}
}
