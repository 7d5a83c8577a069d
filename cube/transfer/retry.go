package transfer

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

type permanentError struct{ error }

func (p permanentError) Unwrap() error { return p.error }

// permanentIf marks err as not worth retrying (a 404, a bad request).
func permanentIf(cond bool, err error) error {
	if cond && err != nil {
		return permanentError{err}
	}
	return err
}

type logKey struct{}

// withLog attaches the logger that retry reports to. It travels in the
// context so that every retry logs, whichever phase calls it, without each
// call site passing a logger along.
func withLog(ctx context.Context, log *slog.Logger) context.Context {
	return context.WithValue(ctx, logKey{}, log)
}

func logFrom(ctx context.Context) *slog.Logger {
	if l, ok := ctx.Value(logKey{}).(*slog.Logger); ok {
		return l
	}
	return slog.Default()
}

// retry runs f up to 1+retries times, sleeping backoff, 2×backoff, … (at
// most 5 s) between attempts; it stops early on a permanent error or when
// ctx ends. Every retry is logged with its reason and attempt number, so a
// peer that keeps failing is visible while it happens, not only at the end.
func retry(ctx context.Context, retries int, backoff time.Duration, f func() error) error {
	var err error
	for attempt := 0; ; attempt++ {
		if err = f(); err == nil {
			return nil
		}
		var p permanentError
		if errors.As(err, &p) || attempt >= retries || ctx.Err() != nil {
			return err
		}
		d := min(backoff<<attempt, 5*time.Second)
		logFrom(ctx).Warn("attempt failed; retrying", "attempt", attempt+1, "attempts", retries+1, "retry_in", d.String(), "err", err)
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		}
	}
}
