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
	fs := flags("fileserver", "--root DIR --listen HOST:PORT [--upload --upload-token-file FILE | --upload --upload-insecure]", stdout, stderr)
	var o fileserver.Options
	fs.StringVar(&o.Root, "root", "", "`directory` to serve (model output, donefiles)")
	listen := fs.String("listen", "127.0.0.1:8080", "`HOST:PORT` to listen on")
	fs.BoolVar(&o.Upload, "upload", false, "accept PUT/POST uploads below --root (default read-only); needs --upload-token-file or --upload-insecure")
	tokenFile := fs.String("upload-token-file", "", "`file` holding the bearer token every upload must send (or $CUBE_UPLOAD_TOKEN)")
	fs.BoolVar(&o.UploadInsecure, "upload-insecure", false, "accept uploads from anyone, without a token (trusted networks only)")
	fs.Int64Var(&o.MaxUpload, "max-upload", 1<<30, "largest upload in `bytes`")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn, error")
	if err := parse(fs, args); err != nil {
		return err
	}
	if o.Root == "" {
		return errors.New("--root is required")
	}
	if o.Upload && !o.UploadInsecure {
		tok, err := readSecret(*tokenFile, "CUBE_UPLOAD_TOKEN")
		if err != nil {
			return err
		}
		if tok == "" {
			return errors.New("--upload needs a token (--upload-token-file or $CUBE_UPLOAD_TOKEN), or --upload-insecure to accept uploads from anyone")
		}
		o.UploadToken = tok
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
	o.Log.Info("listening", "addr", ln.Addr().String(), "root", o.Root, "upload", o.Upload, "upload_insecure", o.UploadInsecure)
	return serveUntilSignal(listener{ln, h})
}

// listener is one address and what it serves.
type listener struct {
	ln net.Listener
	h  http.Handler
}

// serveUntilSignal serves HTTP on every listener until SIGINT/SIGTERM (or
// until one fails), then drains for at most 10 s. A client gets 10 s to send
// its request header and an idle keep-alive connection is closed after 2
// minutes, so that connections opened and left cannot pile up.
func serveUntilSignal(ls ...listener) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, len(ls))
	srvs := make([]*http.Server, len(ls))
	for i, l := range ls {
		srvs[i] = &http.Server{Handler: l.h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
		go func() { errc <- srvs[i].Serve(l.ln) }()
	}
	var err error
	select {
	case err = <-errc:
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, srv := range srvs {
		if serr := srv.Shutdown(sctx); err == nil {
			err = serr
		}
	}
	return err
}
