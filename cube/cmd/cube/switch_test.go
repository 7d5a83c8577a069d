package main

import (
	"context"
	"testing"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/pipeline"
)

// TestPaddleClientSeesOneSwitchInstant: under a client that fans out as
// Paddle's cube-api does (replicas in turn, no version checks, no re-asks),
// every replica of every shard switches at the one instant the transfer
// decided — not whenever its commit request or a timer happens to run — so
// no shard answers the old version after one of its replicas has answered
// the new one, and no lookup fails.
func TestPaddleClientSeesOneSwitchInstant(t *testing.T) {
	// A generous delay: the property under test is that replicas switch at
	// the instant, which needs every commit to arrive before it.
	c := startPipeline(t, 2, 2, "--switch-delay", "1s")
	publish(t, c, "1000", 1, "")
	waitServed(t, c, "1000")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan *pipeline.PaddleStats, 1)
	go func() {
		st, err := c.LoadPaddle(ctx, 4, 64)
		if err != nil {
			t.Error(err)
		}
		done <- st
	}()
	last := ""
	for i, id := range []string{"2000", "3000", "4000"} {
		publish(t, c, id, byte(i+2), "")
		rec, err := c.WaitServed(id, 60*time.Second)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		last = rec.Version
		if rec.WindowUs != 0 {
			t.Errorf("version %s: replicas switched %d µs apart; want all at the decided instant", id, rec.WindowUs)
		}
	}
	time.Sleep(100 * time.Millisecond)
	cancel()
	st := <-done
	if st == nil {
		t.Fatal("no load stats")
	}
	t.Logf("Paddle-like client: %d requests, %d failed, %d mixed batches, %d flip-backs, windows %v", st.Requests, st.Failed, st.Mixed, st.FlipBacks, st.Windows)
	if st.Requests == 0 || len(st.Windows) != 3 {
		t.Fatalf("load saw %d requests and %d switches; want requests across 3 switches", st.Requests, len(st.Windows))
	}
	if st.Failed != 0 || st.FlipBacks != 0 {
		t.Fatalf("failed=%d flip-backs=%d (%s)", st.Failed, st.FlipBacks, st.FirstErr)
	}
	if err := c.CheckReplicas(last); err != nil {
		t.Fatal(err)
	}
}
