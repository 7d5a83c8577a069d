package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/atomicfile"
	"github.com/elasticctr/terraform-provider-ctr/cube/modelout"
)

// exportState is what --watch remembers across restarts: the save it published last.
type exportState struct {
	Save        string `json:"save"`
	Fingerprint string `json:"fingerprint"`
	ID          string `json:"id"`
}

// exportStateFile is kept in the output directory, hidden from the file server's listings.
const exportStateFile = ".export-state.json"

// maxSaveFiles bounds the files of one save that a fingerprint lists.
const maxSaveFiles = 100_000

// watchExports publishes the newest save under in each time it changes. A save is a
// sub-folder of in (EDL's trainer writes models/batch-<k> and models/pass-<p>); it is
// exported once its files are unchanged over one interval (Paddle writes a save file by
// file and marks no end), and a save that fails to export (still incomplete, or corrupt)
// is logged and retried when it changes, never half published.
func watchExports(ctx context.Context, log *slog.Logger, sp exportSpec, in, out string, partBytes int64, interval time.Duration) error {
	statePath := filepath.Join(out, exportStateFile)
	var st exportState
	if b, err := os.ReadFile(statePath); err == nil {
		if err := json.Unmarshal(b, &st); err != nil {
			log.Warn("export state unreadable; starting afresh", "file", statePath, "err", err)
			st = exportState{}
		}
	}
	log.Info("watching for saves", "in", in, "out", out, "format", sp.format, "var", sp.varName, "interval", interval.String(), "last_save", st.Save, "last_id", st.ID)
	var (
		seen, failed string // the fingerprint seen at the previous look; the last one that failed
	)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		save, fp, err := newestSave(in)
		switch {
		case err != nil:
			log.Debug("no save yet", "in", in, "err", err)
		case save+fp == st.Save+st.Fingerprint || fp == failed:
			// Published already, or failed as it is now: wait for a change.
		case fp != seen:
			log.Debug("save changing; waiting for it to settle", "save", save)
		default:
			one := sp
			if one.servingModel != "" && !filepath.IsAbs(one.servingModel) {
				one.servingModel = filepath.Join(in, save, one.servingModel)
			}
			res, err := exportOnce(one, filepath.Join(in, save), out, modelout.Version{PartBytes: partBytes})
			if err != nil {
				failed = fp
				log.Error("save not exported; retrying when it changes", "save", save, "err", err)
				break
			}
			st = exportState{Save: save, Fingerprint: fp, ID: res.entry.ID}
			if err := atomicfile.WriteJSON(statePath, st, 0o644); err != nil {
				log.Warn("export state not saved: a restart exports this save again, as a new version", "err", err)
			}
			log.Info("version published", "save", save, "id", res.entry.ID, "input", res.entry.Input,
				"rows", res.stats.Records, "parts", res.stats.Parts, "mb", float64(res.inBytes)/1e6, "took", res.took.Round(time.Millisecond).String())
		}
		seen = fp
		select {
		case <-ctx.Done():
			log.Info("stopping")
			return nil
		case <-t.C:
		}
	}
}

// newestSave returns the sub-folder of in modified last (hidden ones skipped) and a
// fingerprint of its files: their names, sizes and modification times.
func newestSave(in string) (string, string, error) {
	ents, err := os.ReadDir(in)
	if err != nil {
		return "", "", err
	}
	var (
		best    string
		bestMod time.Time
	)
	for _, e := range ents {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		if mod := newestMod(filepath.Join(in, e.Name()), info.ModTime()); best == "" || mod.After(bestMod) || (mod.Equal(bestMod) && e.Name() > best) {
			best, bestMod = e.Name(), mod
		}
	}
	if best == "" {
		return "", "", errors.New("no save folder")
	}
	fp, err := fingerprint(filepath.Join(in, best))
	return best, fp, err
}

// newestMod is the latest modification time of dir and the files directly in it (a save's
// folder keeps its time when a file in it is rewritten).
func newestMod(dir string, mod time.Time) time.Time {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if info, err := e.Info(); err == nil && info.ModTime().After(mod) {
			mod = info.ModTime()
		}
	}
	return mod
}

func fingerprint(dir string) (string, error) {
	h := sha256.New()
	n := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if n++; n > maxSaveFiles {
			return fmt.Errorf("%s: more than %d files", dir, maxSaveFiles)
		}
		fmt.Fprintf(h, "%s\x00%d\x00%d\x00", p, info.Size(), info.ModTime().UnixNano())
		return nil
	})
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
