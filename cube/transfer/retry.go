package transfer

import (
	"context"
	"errors"
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

// retry runs f up to 1+retries times, sleeping backoff, 2×backoff, … (at
// most 5 s) between attempts; it stops early on a permanent error or when
// ctx ends.
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
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		}
	}
}
