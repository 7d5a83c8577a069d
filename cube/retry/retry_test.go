package retry

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestDo(t *testing.T) {
	var logs bytes.Buffer
	ctx := WithLog(context.Background(), slog.New(slog.NewTextHandler(&logs, nil)))
	calls := 0
	err := Do(ctx, 3, time.Millisecond, func() error {
		calls++
		if calls < 3 {
			return errors.New("flaky")
		}
		return nil
	})
	if err != nil || calls != 3 || strings.Count(logs.String(), "attempt failed; retrying") != 2 {
		t.Fatalf("err %v, calls %d, logs %s", err, calls, logs.String())
	}

	calls = 0
	boom := errors.New("boom")
	if err := Do(ctx, 2, time.Millisecond, func() error { calls++; return boom }); !errors.Is(err, boom) || calls != 3 {
		t.Fatalf("exhausted: err %v calls %d", err, calls)
	}

	calls = 0
	if err := Do(ctx, 5, time.Millisecond, func() error { calls++; return PermanentIf(true, boom) }); !IsPermanent(err) || !errors.Is(err, boom) || calls != 1 {
		t.Fatalf("permanent: err %v calls %d", err, calls)
	}
	if Permanent(nil) != nil || PermanentIf(false, boom) != boom {
		t.Fatal("Permanent(nil) or PermanentIf(false) changed the error")
	}

	cctx, cancel := context.WithCancel(ctx)
	calls = 0
	start := time.Now()
	err = Do(cctx, 5, time.Hour, func() error { calls++; cancel(); return boom })
	if !errors.Is(err, boom) || time.Since(start) > time.Second || calls != 1 {
		t.Fatalf("cancelled: err %v calls %d after %s", err, calls, time.Since(start))
	}
}
