// Package retry runs an operation again after failures that may pass, with
// a doubling pause and a log line per retry, and stops at once on one that
// will not (Permanent) or when the context ends.
package retry

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// MaxPause caps the pause between two attempts.
const MaxPause = 5 * time.Second

type permanentError struct{ error }

func (p permanentError) Unwrap() error { return p.error }

// Permanent marks err as not worth retrying (a 404, a bad request); nil
// stays nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanentError{err}
}

// PermanentIf is Permanent(err) when cond holds, err otherwise.
func PermanentIf(cond bool, err error) error {
	if cond {
		return Permanent(err)
	}
	return err
}

// IsPermanent reports whether err, or an error it wraps, was marked
// Permanent.
func IsPermanent(err error) bool {
	var p permanentError
	return errors.As(err, &p)
}

type logKey struct{}

// WithLog attaches the logger that Do reports to. It travels in the context
// so that every retry logs, whoever calls Do, without each call site
// passing a logger along.
func WithLog(ctx context.Context, log *slog.Logger) context.Context {
	return context.WithValue(ctx, logKey{}, log)
}

func logFrom(ctx context.Context) *slog.Logger {
	if l, ok := ctx.Value(logKey{}).(*slog.Logger); ok {
		return l
	}
	return slog.Default()
}

// Do runs f up to 1+retries times, pausing backoff, 2×backoff, … (at most
// MaxPause) between attempts; it stops early on a Permanent error or when
// ctx ends. Every retry is logged with its reason and attempt number, so a
// peer that keeps failing is visible while it happens, not only at the end.
func Do(ctx context.Context, retries int, backoff time.Duration, f func() error) error {
	var err error
	for attempt := 0; ; attempt++ {
		if err = f(); err == nil {
			return nil
		}
		if IsPermanent(err) || attempt >= retries || ctx.Err() != nil {
			return err
		}
		d := min(backoff<<attempt, MaxPause)
		logFrom(ctx).Warn("attempt failed; retrying", "attempt", attempt+1, "attempts", retries+1, "retry_in", d.String(), "err", err)
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		}
	}
}
