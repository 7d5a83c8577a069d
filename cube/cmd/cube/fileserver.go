package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/fileserver"
)

func runFileserver(args []string, stdout, stderr io.Writer) error {
	fs := flags("fileserver", "--root DIR --listen HOST:PORT [--upload]", stdout, stderr)
	var o fileserver.Options
	fs.StringVar(&o.Root, "root", "", "`directory` to serve (model output, donefiles)")
	listen := fs.String("listen", "127.0.0.1:8080", "`HOST:PORT` to listen on")
	fs.BoolVar(&o.Upload, "upload", false, "accept PUT/POST uploads below --root (default read-only)")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn, error")
	if err := parse(fs, args); err != nil {
		return err
	}
	if o.Root == "" {
		return errors.New("--root is required")
	}
	o.Log = logger(stderr, *logLevel)
	h, err := fileserver.New(o)
	if err != nil {
		return err
	}
	defer h.Close()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	o.Log.Info("listening", "addr", ln.Addr().String(), "root", o.Root, "upload", o.Upload)
	return serveUntilSignal(ln, h)
}

// serveUntilSignal serves HTTP on ln until SIGINT/SIGTERM, then drains for
// at most 10 s.
func serveUntilSignal(ln net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}
