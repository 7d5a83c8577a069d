// Package bounded reads what comes from elsewhere (an HTTP body, a file named in a request)
// whole, up to a limit in bytes, and refuses more instead of returning a truncated prefix:
// a caller never decodes part of a document as if it were all of it.
package bounded

import (
	"errors"
	"fmt"
	"io"
)

// ErrTooLarge is what ReadAll's error wraps when r holds more than the limit.
var ErrTooLarge = errors.New("too large")

// ReadAll reads r to its end, at most max bytes of it. More than max bytes is an error
// wrapping ErrTooLarge that names the limit ("over the 1048576-byte limit"), and no data.
func ReadAll(r io.Reader, max int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("over the %d-byte limit: %w", max, ErrTooLarge)
	}
	return b, nil
}
