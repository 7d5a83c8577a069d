package launch

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/elasticctr/terraform-provider-ctr/cube/servingconf"
)

// ErrNoModel is FetchModel's answer while the model URL has nothing yet (404): the trainer
// has not published a first model. The launcher waits, it does not fail.
var ErrNoModel = errors.New("no model published yet")

// Limits of one model archive: a serving model is a program and its dense parameters (the
// criteo CTR model is 2 MB; the embeddings are the cube's).
const (
	DefaultMaxModelBytes = 4 << 30
	maxModelEntries      = 100_000
)

// FetchModel downloads the .tar.gz at url and unpacks it into a new folder below stage
// (regular files and folders only: no links, no devices, nothing outside the folder, at most
// maxBytes unpacked). It returns the folder that holds serving_server_conf.prototxt. A 404 is
// ErrNoModel; any other failure leaves nothing behind.
func FetchModel(ctx context.Context, client *http.Client, url, stage string, maxBytes int64) (string, error) {
	resp, err := get(ctx, client, url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		return "", ErrNoModel
	default:
		return "", fmt.Errorf("get %s: %s", url, resp.Status)
	}
	if err := os.MkdirAll(stage, 0o755); err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp(stage, "model-")
	if err != nil {
		return "", err
	}
	model, err := unpack(resp.Body, dir, maxBytes)
	if err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("model %s: %w", url, err)
	}
	return model, nil
}

// unpack extracts a gzipped tar into dir and finds the model folder in it.
func unpack(r io.Reader, dir string, maxBytes int64) (string, error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return "", fmt.Errorf("not a .tar.gz: %w", err)
	}
	tr := tar.NewReader(zr)
	var total int64
	for n := 0; ; n++ {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", fmt.Errorf("not a .tar.gz: %w", err)
		}
		if n >= maxModelEntries {
			return "", fmt.Errorf("more than %d entries", maxModelEntries)
		}
		name := path.Clean(strings.TrimPrefix(h.Name, "./"))
		if name == "." {
			continue
		}
		if !filepath.IsLocal(name) {
			return "", fmt.Errorf("entry %q is outside the archive's folder", h.Name)
		}
		target := filepath.Join(dir, filepath.FromSlash(name))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return "", err
			}
		case tar.TypeReg:
			if total += h.Size; h.Size < 0 || total > maxBytes {
				return "", fmt.Errorf("over %d bytes unpacked", maxBytes)
			}
			if err := writeFile(target, tr, h.Size); err != nil {
				return "", err
			}
		default:
			return "", fmt.Errorf("entry %q is a link or a device: a model archive holds files and folders only", h.Name)
		}
	}
	return findModel(dir)
}

func writeFile(target string, r io.Reader, size int64) error {
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(target, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.CopyN(f, r, size); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", target, err)
	}
	return f.Close()
}

// findModel is the first folder below dir, in lexical walk order, that holds
// serving_server_conf.prototxt.
func findModel(dir string) (string, error) {
	found := ""
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || found != "" {
			return err
		}
		if !d.IsDir() && d.Name() == servingconf.ModelConfFile {
			found = filepath.Dir(p)
			return fs.SkipAll
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	if found == "" {
		return "", fmt.Errorf("no %s: the archive must hold a serving model folder (what paddle_serving_client.convert writes)", servingconf.ModelConfFile)
	}
	return found, nil
}

// get sends a GET of url with client, bound to ctx.
func get(ctx context.Context, client *http.Client, url string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	return client.Do(req)
}
