package main

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestBoundedService: what the transfer's listeners get. A request that
// does not arrive whole within the read timeout is cut; the connection cap
// keeps the next connection waiting until one closes.
func TestBoundedService(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	srv := boundedService(h, 300*time.Millisecond, time.Second)
	go srv.Serve(limited(ln, 2))
	defer srv.Close()
	addr := ln.Addr().String()

	get := func(c net.Conn, wait time.Duration) error {
		if _, err := fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			return err
		}
		_ = c.SetReadDeadline(time.Now().Add(wait))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	// A slow body: its request is cut at the read timeout.
	slow, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	fmt.Fprintf(slow, "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nabc")
	start := time.Now()
	_ = slow.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := slow.Read(make([]byte, 1)); err == nil {
		// An answer (the handler ignores the body): read to the close.
		for err == nil {
			_, err = slow.Read(make([]byte, 512))
		}
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("a request short of its body held its connection %v", took)
	}
	slow.Close()

	// Two connections held: a third waits.
	var held []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := get(c, 2*time.Second); err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	third, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer third.Close()
	if err := get(third, 300*time.Millisecond); err == nil {
		t.Fatal("a third connection was served with a cap of 2")
	}
	held[0].Close()
	_ = third.SetReadDeadline(time.Now().Add(2 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(third), nil)
	if err != nil {
		t.Fatalf("the third connection once one closed: %v", err)
	}
	resp.Body.Close()
}
