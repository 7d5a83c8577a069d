package main

import (
	"errors"
	"io"
	"net"

	"github.com/elasticctr/terraform-provider-ctr/cube/fileserver"
)

func runFileserver(fs flagSet, stdout, stderr io.Writer) error {
	var o fileserver.Options
	fs.StringVar(&o.Root, "root", "", "`directory` to serve (model output, donefiles)")
	listen := fs.String("listen", "127.0.0.1:8080", "`HOST:PORT` to listen on")
	fs.BoolVar(&o.Upload, "upload", false, "accept PUT/POST uploads below --root (default read-only); needs --upload-token-file or --upload-insecure")
	tokenFile := fs.String("upload-token-file", "", "`file` holding the bearer token every upload must send (or $CUBE_UPLOAD_TOKEN)")
	fs.BoolVar(&o.UploadInsecure, "upload-insecure", false, "accept uploads from anyone, without a token (trusted networks only)")
	fs.Int64Var(&o.MaxUpload, "max-upload", 1<<30, "largest upload in `bytes`")
	newLogger := logFlag(fs, logLevelHelp)
	if err := fs.parse(); err != nil {
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
	o.Log = newLogger(stderr)
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
	return serveUntilSignal(o.Log, listener{ln, httpService(h)})
}
