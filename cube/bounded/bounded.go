// Package bounded reads what comes from elsewhere (an HTTP body, a file named in a request)
// whole, up to a limit in bytes, and refuses more instead of returning a truncated prefix:
// a caller never decodes part of a document as if it were all of it.
package bounded

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
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

// ReadFile reads the file at path whole, at most max bytes of it, as ReadAll does. Its
// errors name the path, as os's do: a failed read (or one over the limit) is a
// *fs.PathError whose Op is "read".
func ReadFile(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := ReadAll(f, max)
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: path, Err: err}
	}
	return b, nil
}
