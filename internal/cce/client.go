// Package cce manages Baidu Cloud CCE clusters and their worker pools over bce-sdk-go:
// serialised SDK calls, a deadline on each, and errors mapped to messages a user can act on.
// It knows nothing of Terraform.
package cce

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/baidubce/bce-sdk-go/auth"
	"github.com/baidubce/bce-sdk-go/bce"
	ccev2 "github.com/baidubce/bce-sdk-go/services/cce/v2"
)

// sdkMu serialises every SDK call in the process. The SDK is not safe for concurrent use:
// each request sets the timeout of one package-global http.Client (bce-sdk-go http/client.go),
// so two calls in flight race on it. Terraform runs resources in parallel, hence one lock for
// all clients, not one per client.
var sdkMu sync.Mutex

// ErrNotFound is returned when a cluster or worker pool does not exist (any more).
var ErrNotFound = errors.New("not found")

// Config says how to reach CCE.
type Config struct {
	AccessKey, SecretKey, SessionToken string
	// Endpoint is "https://cce.<region>.baidubce.com" unless overridden (mirrors, the emulator).
	Endpoint string
	// CallTimeout bounds one SDK call, including its own retries. 0 means 2 minutes.
	CallTimeout time.Duration
}

// EndpointFor is the public CCE v2 endpoint of a region, over HTTPS (the SDK's default
// scheme is plain HTTP).
func EndpointFor(region string) string { return "https://cce." + region + ".baidubce.com" }

// Client is a CCE client. Its methods take a context: the SDK does not, so a call whose
// context ends is abandoned (it finishes in the background, still holding the lock).
type Client struct {
	sdk     *ccev2.Client
	timeout time.Duration
}

// New creates a client. Nothing is contacted.
func New(cfg Config) (*Client, error) {
	if cfg.AccessKey == "" || cfg.SecretKey == "" {
		return nil, errors.New("the Baidu Cloud credentials are missing: set the provider's access_key and secret_key, or BCE_ACCESS_KEY_ID and BCE_SECRET_ACCESS_KEY")
	}
	sdkMu.Lock()
	defer sdkMu.Unlock()
	c, err := ccev2.NewClient(cfg.AccessKey, cfg.SecretKey, cfg.Endpoint)
	if err != nil {
		return nil, fmt.Errorf("create CCE client for %s: %w", cfg.Endpoint, err)
	}
	if cfg.SessionToken != "" {
		cred, err := auth.NewSessionBceCredentials(cfg.AccessKey, cfg.SecretKey, cfg.SessionToken)
		if err != nil {
			return nil, fmt.Errorf("STS credentials: %w", err)
		}
		c.Config.Credentials = cred
	}
	timeout := cfg.CallTimeout
	if timeout == 0 {
		timeout = 2 * time.Minute
	}
	// The SDK's own timeout (20 minutes by default) would outlive our deadline.
	c.Config.ConnectionTimeoutInMillis = int(timeout / time.Millisecond)
	return &Client{sdk: c, timeout: timeout}, nil
}

// call runs one SDK call under the process-wide lock, bounded by ctx and the call timeout.
func call[T any](ctx context.Context, c *Client, what string, fn func(*ccev2.Client) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		// The lock is taken inside the goroutine so that waiting for it also respects ctx.
		sdkMu.Lock()
		defer sdkMu.Unlock()
		v, err := fn(c.sdk)
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			var zero T
			return zero, mapError(what, r.err)
		}
		return r.v, nil
	case <-ctx.Done():
		var zero T
		return zero, fmt.Errorf("%s: no answer from CCE in time: %w", what, ctx.Err())
	}
}

// mapError turns the SDK's errors into ours: not-found codes become ErrNotFound, and
// service errors keep CCE's code, message and request ID (what support asks for).
func mapError(what string, err error) error {
	var se *bce.BceServiceError
	if errors.As(err, &se) {
		if strings.HasSuffix(se.Code, "NotFound") || se.StatusCode == 404 {
			return fmt.Errorf("%s: %w (%s: %s)", what, ErrNotFound, se.Code, se.Message)
		}
		hint := ""
		switch {
		case se.StatusCode == 401 || se.StatusCode == 403 || strings.Contains(se.Code, "Signature") ||
			strings.Contains(se.Code, "AccessKey") || strings.Contains(se.Code, "SecurityToken") || strings.Contains(se.Code, "AccessDenied"):
			hint = " (check the access key, secret key and STS token, and that the key may use CCE)"
		case se.StatusCode == 429 || strings.Contains(se.Code, "Throttl"):
			hint = " (CCE is throttling requests; retry later)"
		case se.StatusCode >= 500:
			hint = " (a CCE server error; the SDK already retried)"
		}
		return fmt.Errorf("%s: CCE refused the request: %s: %s (HTTP %d, request ID %s)%s", what, se.Code, se.Message, se.StatusCode, se.RequestId, hint)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// IsNotFound reports whether err says the object does not exist.
func IsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }
