package transfer

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"

	"github.com/elasticctr/terraform-provider-ctr/cube/bounded"
	"github.com/elasticctr/terraform-provider-ctr/cube/retry"
)

// completeMarker marks an input directory whose files all arrived in full.
const completeMarker = ".cube-input-complete"

var hrefRE = regexp.MustCompile(`(?i)href="([^"]+)"`)

// fetchInput mirrors a SequenceFile directory into dir, as Paddle's transfer
// does with "wget -r -np -nd": a URL is crawled through its directory
// listings (not above it, at most 8 levels), every file downloaded with
// resume (Range) and checked against the Content-Length the server
// announced, the whole mirror within the size cap (inputLimit). A local path
// is used in place. It returns the local directory.
func (t *Transfer) fetchInput(ctx context.Context, loc, dir string) (string, int64, error) {
	if !strings.HasPrefix(loc, "http://") && !strings.HasPrefix(loc, "https://") {
		st, err := os.Stat(loc)
		if err != nil {
			return "", 0, fmt.Errorf("input %q: %w", loc, err)
		}
		return loc, st.Size(), nil
	}
	if _, err := os.Stat(filepath.Join(dir, completeMarker)); err == nil {
		return dir, 0, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", 0, err
	}
	if !strings.HasSuffix(loc, "/") {
		loc += "/"
	}
	base, err := url.Parse(loc)
	if err != nil {
		return "", 0, err
	}
	limit, err := t.inputLimit()
	if err != nil {
		return "", 0, err
	}
	var total int64
	var walk func(u *url.URL, rel string, depth int) error
	walk = func(u *url.URL, rel string, depth int) error {
		if depth > 8 {
			return fmt.Errorf("input %q: directories nested too deep", loc)
		}
		body, err := t.getSmall(ctx, u.String())
		if err != nil {
			return fmt.Errorf("input listing: %w", err)
		}
		for _, m := range hrefRE.FindAllStringSubmatch(string(body), -1) {
			ref, err := url.Parse(m[1])
			if err != nil || ref.IsAbs() || ref.RawQuery != "" || strings.HasPrefix(ref.Path, "/") {
				continue
			}
			name := strings.TrimSuffix(ref.Path, "/")
			if name == "" || strings.Contains(name, "/") || name == "." || name == ".." ||
				strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
				continue
			}
			child := u.ResolveReference(ref)
			if !strings.HasPrefix(child.Path, base.Path) {
				continue // never above the input directory (wget -np)
			}
			if strings.HasSuffix(ref.Path, "/") {
				if err := walk(child, path.Join(rel, name), depth+1); err != nil {
					return err
				}
				continue
			}
			n, err := t.downloadFile(ctx, child.String(), filepath.Join(dir, filepath.FromSlash(path.Join(rel, name))), limit-total)
			if err != nil {
				return err
			}
			total += n
		}
		return nil
	}
	if err := walk(base, "", 0); err != nil {
		return "", 0, err
	}
	if err := os.WriteFile(filepath.Join(dir, completeMarker), nil, 0o644); err != nil {
		return "", 0, err
	}
	return dir, total, nil
}

// maxListing bounds a directory listing of the input server (getSmall); a larger one is
// refused rather than cut, which would drop files from the input.
const maxListing = 16 << 20

func (t *Transfer) getSmall(ctx context.Context, u string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, t.opts.StepTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := t.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("get %s: %s", u, resp.Status)
	}
	b, err := bounded.ReadAll(resp.Body, maxListing)
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", u, err)
	}
	return b, nil
}

// inputLimit is MaxInputBytes, or by default half of what the work disk
// has free beyond InputDiskReserve (the build writes about as much again).
func (t *Transfer) inputLimit() (int64, error) {
	if t.opts.MaxInputBytes > 0 {
		return t.opts.MaxInputBytes, nil
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(t.inputDir(), &st); err != nil {
		return 0, fmt.Errorf("free space of %q: %w", t.inputDir(), err)
	}
	free := int64(st.Bavail) * st.Bsize
	if free <= t.opts.InputDiskReserve {
		return 0, fmt.Errorf("work disk %q: %d bytes free, no more than the %d reserved (--input-disk-reserve)", t.inputDir(), free, t.opts.InputDiskReserve)
	}
	return (free - t.opts.InputDiskReserve) / 2, nil
}

// errInputTooLarge fails the version for good (and is not retried): the
// same input will not shrink.
func errInputTooLarge(what string, left int64) error {
	return retry.Permanent(&brokenError{final: true,
		err: fmt.Errorf("%s, over what is left of the input size cap (%d bytes; --max-input-bytes)", what, left)})
}

// downloadFile fetches u into file, resuming a partial one, with bounded
// retries; it checks the final size against the server's, and never writes
// more than left bytes.
func (t *Transfer) downloadFile(ctx context.Context, u, file string, left int64) (int64, error) {
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return 0, err
	}
	var n int64
	err := retry.Do(ctx, t.opts.Retries, t.opts.Backoff, func() error {
		var err error
		n, err = t.downloadOnce(ctx, u, file, left)
		return err
	})
	return n, err
}

func (t *Transfer) downloadOnce(ctx context.Context, u, file string, left int64) (int64, error) {
	have := int64(0)
	if st, err := os.Stat(file); err == nil {
		have = st.Size()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, err
	}
	if have > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", have))
	}
	resp, err := t.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	flag := os.O_WRONLY | os.O_CREATE
	var want int64
	switch {
	case resp.StatusCode == http.StatusRequestedRangeNotSatisfiable && have > 0:
		return have, nil // already complete
	case resp.StatusCode == http.StatusPartialContent && have > 0:
		flag |= os.O_APPEND
		want = have + resp.ContentLength
	case resp.StatusCode == http.StatusOK:
		flag |= os.O_TRUNC
		have, want = 0, resp.ContentLength
	default:
		return 0, retry.PermanentIf(resp.StatusCode == http.StatusNotFound, fmt.Errorf("get %s: %s", u, resp.Status))
	}
	if resp.ContentLength >= 0 && want > left {
		return 0, fmt.Errorf("get %s: %w", u, errInputTooLarge(fmt.Sprintf("declared size %d bytes", want), left)) // refused before a byte is written
	}
	f, err := os.OpenFile(file, flag, 0o644)
	if err != nil {
		return 0, err
	}
	// One byte over the cap is enough to know: the rest is never read.
	n, err := io.Copy(f, io.LimitReader(resp.Body, left-have+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && have+n > left {
		err = errInputTooLarge(fmt.Sprintf("more than %d bytes", left), left)
	}
	if err != nil {
		return 0, fmt.Errorf("get %s: %w", u, err)
	}
	if resp.ContentLength >= 0 && have+n != want {
		return 0, fmt.Errorf("get %s: %d bytes, server announced %d", u, have+n, want)
	}
	return have + n, nil
}
