package main

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/net/netutil"
)

// untilSignal is a context that ends at SIGINT or SIGTERM: how every long-running
// subcommand is stopped.
func untilSignal() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// interruptible runs f with a context that ends at SIGINT or SIGTERM.
func interruptible(f func(context.Context) error) error {
	ctx, stop := untilSignal()
	defer stop()
	return f(ctx)
}

// service is what serveUntilSignal runs on a listener: an http.Server or a cube server.
type service interface {
	Serve(net.Listener) error
	Shutdown(context.Context) error
}

// listener is one address and what serves it.
type listener struct {
	ln  net.Listener
	srv service
}

// httpService serves h. A client gets 10 s to send its request header and an idle
// keep-alive connection is closed after 2 minutes, so that connections opened and left
// cannot pile up.
func httpService(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
}

// boundedService is httpService for endpoints whose requests are small: a whole request
// must arrive within read, and, if write is not 0, its answer be written within write
// (0 where large files are served).
func boundedService(h http.Handler, read, write time.Duration) *http.Server {
	s := httpService(h)
	s.ReadTimeout, s.WriteTimeout = read, write
	return s
}

// limited holds ln to n connections at once: the next waits in the listen backlog until
// one closes (netutil.LimitListener).
func limited(ln net.Listener, n int) net.Listener { return netutil.LimitListener(ln, n) }

// serveUntilSignal serves every listener until SIGINT/SIGTERM (or until one fails), then
// lets the requests in flight finish for at most 10 s and returns once every Serve has.
func serveUntilSignal(log *slog.Logger, ls ...listener) error {
	ctx, stop := untilSignal()
	defer stop()
	errc := make(chan error, len(ls))
	for _, l := range ls {
		go func() { errc <- l.srv.Serve(l.ln) }()
	}
	running := len(ls)
	var err error
	select {
	case err = <-errc:
		running--
	case <-ctx.Done():
	}
	log.Info("shutting down: finishing requests in flight (at most 10s)")
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, l := range ls {
		if serr := l.srv.Shutdown(sctx); err == nil {
			err = serr
		}
	}
	for ; running > 0; running-- {
		<-errc // http.ErrServerClosed, or nil from a cube server
	}
	return err
}
