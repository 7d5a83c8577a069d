package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/api"
	"github.com/elasticctr/terraform-provider-ctr/cube/transfer"
)

// replicaFlags collects repeated --shard-replicas I=HOST:PORT,HOST:PORT.
type replicaFlags map[int][]string

func (r replicaFlags) String() string { return fmt.Sprint(map[int][]string(r)) }

func (r replicaFlags) Set(v string) error {
	i, addrs, ok := strings.Cut(v, "=")
	n, err := strconv.Atoi(i)
	if !ok || err != nil || n < 0 || addrs == "" {
		return fmt.Errorf("want I=HOST:PORT[,HOST:PORT...], got %q", v)
	}
	for _, a := range strings.Split(addrs, ",") {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return fmt.Errorf("replica %q: %w", a, err)
		}
		r[n] = append(r[n], a)
	}
	return nil
}

func runTransfer(fs flagSet, stdout, stderr io.Writer) error {
	var o transfer.Options
	reps := replicaFlags{}
	fs.StringVar(&o.Donefile, "donefile", "", "`URL or path` of base.txt (patch.txt is its sibling)")
	fs.StringVar(&o.Dict, "dict", "", "dictionary `name`")
	shards := fs.Int("shards", 0, "shard count `N`, if given a check: the shards are those --shard-replicas names")
	fs.Var(reps, "shard-replicas", "`I=HOST:PORT,HOST:PORT` cube servers (with --agent) of shard I; repeat once per shard, 0 to N-1")
	fs.StringVar(&o.Work, "work", "", "`directory` for state, downloaded input and built versions (served under /files/)")
	listen := fs.String("listen", "127.0.0.1:8099", "`HOST:PORT` of the status API (and of /files/ unless --files-listen is set)")
	filesListen := fs.String("files-listen", "", "`HOST:PORT` of /files/ (the built versions agents download), apart from the status API so that a NetworkPolicy can admit only cube servers to it; default: on --listen")
	tokenFile := fs.String("control-token-file", "", "bearer token `file` for the agents (or $CUBE_CONTROL_TOKEN), read again when it changes: an agent that refuses the new token is offered the one it replaced for "+strconv.Itoa(int(api.ControlTokenGrace/time.Minute))+" minutes")
	fs.StringVar(&o.PublicURL, "public-url", "", "`URL` at which agents reach this transfer (they download <URL>/files/<version>/shard-<i>.cube)")
	fs.StringVar(&o.Mode, "mode", "base", "base (base.txt only) or base_delta (also patch.txt)")
	fs.IntVar(&o.MaxLayers, "max-layers", transfer.DefaultMaxLayers, "base_delta: build each patch as a layer of its keys alone, served over the version before it, while that one has fewer than `N` layers under it; the next patch is built in full, merging them (0: every patch in full)")
	fs.StringVar(&o.ServeVersion, "serve-version", "", "pin the cube to this kept `version` (the decided one or the one before it, /status kept_versions): it is rolled out as any version, all replicas switching at one instant, heal keeps every replica on it, and no donefile line rolls out until the flag is dropped")
	fs.DurationVar(&o.Poll, "poll", transfer.DefaultPoll, "donefile polling `interval`")
	fs.DurationVar(&o.PrepareTimeout, "prepare-timeout", transfer.DefaultPrepareTimeout, "deadline of the prepare phase (every replica downloaded, verified, loaded)")
	fs.DurationVar(&o.StepTimeout, "step-timeout", transfer.DefaultStepTimeout, "deadline of one call to an agent")
	fs.DurationVar(&o.ConnectTimeout, "connect-timeout", transfer.DefaultConnectTimeout, "deadline of connecting to the donefile server, the input server or an agent")
	fs.DurationVar(&o.HeaderTimeout, "header-timeout", transfer.DefaultHeaderTimeout, "deadline of a response header once a request is sent")
	fs.DurationVar(&o.IdleTimeout, "read-idle-timeout", transfer.DefaultIdleTimeout, "a request whose connection moves no byte for this long fails")
	fs.DurationVar(&o.DonefileTimeout, "donefile-timeout", transfer.DefaultDonefileTimeout, "deadline of one read of base.txt or patch.txt")
	fs.DurationVar(&o.InputTimeout, "input-timeout", transfer.DefaultInputTimeout, "deadline of mirroring one version's input (listings, files, retries)")
	fs.Int64Var(&o.MaxInputBytes, "max-input-bytes", 0, "cap on one version's mirrored input in `bytes`; over it the version fails (default: half the work disk's free space beyond --input-disk-reserve)")
	fs.Int64Var(&o.InputDiskReserve, "input-disk-reserve", transfer.DefaultInputDiskReserve, "`bytes` of the work disk the default --max-input-bytes leaves free")
	fs.IntVar(&o.BuildAttempts, "build-attempts", transfer.DefaultBuildAttempts, "builds of one version before it is marked failed (then only a newer donefile line is tried)")
	fs.IntVar(&o.Retries, "retries", transfer.DefaultRetries, "extra attempts of one call")
	fs.DurationVar(&o.Backoff, "backoff", transfer.DefaultBackoff, "first pause between attempts (doubles, at most 5s)")
	fs.DurationVar(&o.SwitchDelay, "switch-delay", transfer.DefaultSwitchDelay, "replicas switch together this long after the commit decision: every replica serves each request arriving from that instant on from the new version")
	fs.DurationVar(&o.CommitTimeout, "commit-timeout", transfer.DefaultCommitTimeout, "bound of the commit phase from the switch instant: a replica that has not switched by then, while every shard has one that has, is fenced (not Ready until it serves the decided version) and left to the heal pass, and later models move on")
	fs.DurationVar(&o.HealInterval, "heal-interval", transfer.DefaultHealInterval, "how often every replica is asked what it serves; one that does not serve the decided version (restarted empty, rescheduled, added) is prepared and switched to it")
	fs.DurationVar(&o.RetryAfter, "retry-after", 0, "first pause before retrying a failed rollout (doubles, at most 5m; default --poll)")
	fs.DurationVar(&o.MaxRetryAfter, "max-retry-after", transfer.DefaultMaxRetryAfter, "longest pause between rollout attempts")
	maxConns := fs.Int("max-conns", transfer.DefaultMaxConns, "most connections served at once on each listener; more wait in the listen backlog")
	inputFlags(fs.FlagSet, &o.Seq, &o.AllowEmpty)
	newLogger := logFlag(fs, logLevelHelp)
	if err := fs.parse(); err != nil {
		return err
	}
	if *shards != 0 && *shards != len(reps) {
		return fmt.Errorf("--shard-replicas names %d shards, --shards is %d", len(reps), *shards)
	}
	for i := range len(reps) {
		if len(reps[i]) == 0 {
			return fmt.Errorf("--shard-replicas %d=... is missing (shards are numbered 0 to %d)", i, len(reps)-1)
		}
		o.Replicas = append(o.Replicas, reps[i])
	}
	if *tokenFile != "" {
		o.TokenFile = *tokenFile // read again when it changes
	} else if o.Token = strings.TrimSpace(os.Getenv("CUBE_CONTROL_TOKEN")); o.Token == "" {
		return errors.New("a control token is required (--control-token-file or $CUBE_CONTROL_TOKEN)")
	}
	o.Log = newLogger(stderr)
	t, err := transfer.New(o)
	if err != nil {
		return err
	}
	api, files, err := t.Handlers(*filesListen == "")
	if err != nil {
		return err
	}
	// Small requests everywhere; answers are small on the status API unless it serves
	// /files/ too, whose versions take as long to download as they take.
	apiWrite := transfer.HTTPWriteTimeout
	if files == nil {
		apiWrite = 0
	}
	ls := []listener{{srv: boundedService(api, transfer.HTTPReadTimeout, apiWrite)}}
	if files != nil {
		ls = append(ls, listener{srv: boundedService(files, transfer.HTTPReadTimeout, 0)})
	}
	for i, addr := range []string{*listen, *filesListen}[:len(ls)] {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			for _, l := range ls[:i] {
				l.ln.Close()
			}
			return err
		}
		ls[i].ln = limited(ln, *maxConns)
	}
	filesAddr := ""
	if files != nil {
		filesAddr = ls[1].ln.Addr().String()
	}
	o.Log.Info("listening", "addr", ls[0].ln.Addr().String(), "filesAddr", filesAddr, "donefile", o.Donefile, "shards", len(o.Replicas), "version", version)
	ctx, stop := untilSignal()
	defer stop()
	go t.Run(ctx)
	return serveUntilSignal(o.Log, ls...)
}
