package seqfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Files lists the input files under path: path itself if it is a file, or
// every regular file below it, recursively, in lexical order, skipping names
// that start with "." or "_" (Hadoop's _SUCCESS, .crc files, temp files).
func Files(path string) ([]string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("input %q: %w", path, err)
	}
	if !st.IsDir() {
		return []string{path}, nil
	}
	var files []string
	err = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if p != path && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Type().IsRegular() {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list input %q: %w", path, err)
	}
	return files, nil
}

// Func receives one record; value is only valid during the call.
type Func func(key uint64, value []byte) error

// ReadAll reads every record of every file under path (see Files) in order.
func ReadAll(path string, opts Options, fn Func) error {
	files, err := Files(path)
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("input %q: no files", path)
	}
	for _, f := range files {
		if err := ReadFile(f, opts, fn); err != nil {
			return err
		}
	}
	return nil
}

// ReadFile reads every record of one file, to its end.
func ReadFile(path string, opts Options, fn Func) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open input %q: %w", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("stat input %q: %w", path, err)
	}
	var rd *Reader
	if st.Mode().IsRegular() {
		rd, err = NewReaderSize(f, st.Size(), path, opts)
	} else {
		rd, err = NewReader(f, path, opts) // a pipe: no size to check against
	}
	if err != nil {
		return err
	}
	defer rd.Close()
	for {
		k, v, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := fn(k, v); err != nil {
			return err
		}
	}
}
