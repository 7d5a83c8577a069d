package stack

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"

	"github.com/elasticctr/terraform-provider-ctr/cube/donefile"
	"github.com/elasticctr/terraform-provider-ctr/cube/fileserver"
	"github.com/elasticctr/terraform-provider-ctr/cube/paddle"
	"github.com/elasticctr/terraform-provider-ctr/cube/seqfile"
	"github.com/elasticctr/terraform-provider-ctr/internal/cubetest"
)

// The recipes' stand-in trainers are this test binary itself: a recipe's entry runs under a
// real /bin/sh with a folder first on PATH in which the image's interpreter (python3) is a
// link to the test binary, and TestMain runs the stand-in when it is started by that name.
func TestMain(m *testing.M) {
	if slices.Contains(standInInterpreters, filepath.Base(os.Args[0])) {
		os.Exit(standInPython(os.Args[1:]))
	}
	cubetest.Main(m, nil)
}

// standInInterpreters are the names the recipes' entries start their scripts with.
var standInInterpreters = []string{"python", "python3"}

// standInRowsEnv sizes the stand-in trainers' tables (a test's knob; the scripts' own
// defaults are a million rows and more).
const standInRowsEnv = "STANDIN_ROWS"

// standInHostsEnv tells a stand-in the cluster's names: "host:port=127.0.0.1:port,...", the
// Services of the rendered set, each answered by a process of the test on loopback.
const standInHostsEnv = "STANDIN_HOSTS"

// standInNamesEnv lists the pod names the cluster's DNS resolves ("<pod>.<job>" under
// Volcano's svc plugin), comma-separated.
const standInNamesEnv = "STANDIN_NAMES"

// standInPython dispatches on the script an image's entry runs.
func standInPython(args []string) int {
	scripts := map[string]func([]string) error{"train_with_mlflow.py": fleetCTRTrainer, "train.py": edlTrainer,
		"tools/static_ps_trainer.py": paddleRecTrainer}
	if len(args) > 0 && args[0] == "-u" { // unbuffered output
		args = args[1:]
	}
	if len(args) > 0 && scripts[args[0]] != nil {
		if err := scripts[args[0]](args[1:]); err != nil {
			fmt.Fprintf(os.Stderr, "stand-in %s: %v\n", args[0], err)
			return 1
		}
		return 0
	}
	fmt.Fprintf(os.Stderr, "python3: can't open file %q: no such script in the stand-in image\n", strings.Join(args, " "))
	return 2
}

// fleetCTRTrainer stands in for ElasticCTR's fleet-ctr/train_with_mlflow.py (at c493c6b), as
// the image runs it from its workspace folder: it reads what the script reads, in its order,
// failing where the script would, and on the first trainer writes what process_rawmodel.py
// (save_program/dumper.py and parameter_to_seqfile) writes after an hour of training.
func fleetCTRTrainer(args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("usage: train_with_mlflow.py <slot.conf>, got %q", args)
	}
	if wd, _ := os.Getwd(); filepath.Base(wd) != "workspace" {
		return fmt.Errorf("started in %q: the script and its helpers are in the image's workspace folder", wd)
	}
	need := func(name string) (string, error) { // os.environ[name]: KeyError when unset
		v, ok := os.LookupEnv(name)
		if !ok {
			return "", fmt.Errorf("KeyError: %q", name)
		}
		return v, nil
	}
	pyInt := func(name string) (int, error) { // int(os.getenv(name)): TypeError on None
		v, ok := os.LookupEnv(name)
		if !ok {
			return 0, fmt.Errorf("int() of unset %s: TypeError", name)
		}
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return 0, fmt.Errorf("int(%s=%q): ValueError", name, v)
		}
		return n, nil
	}
	// wget $FILE_SERVER_SERVICE_HOST:$FILE_SERVER_SERVICE_PORT/slot.conf, else "No Slot Conf Found."
	host, err := need("FILE_SERVER_SERVICE_HOST")
	if err != nil {
		return err
	}
	port, err := need("FILE_SERVER_SERVICE_PORT")
	if err != nil {
		return err
	}
	if err := standInGet(host+":"+port, "/slot.conf", "slot.conf"); err != nil {
		return fmt.Errorf("No Slot Conf Found. (%w)", err)
	}
	slots, err := os.ReadFile(args[0])
	if err != nil {
		return err
	}
	if len(strings.Fields(string(slots))) == 0 {
		return fmt.Errorf("%s names no slot", args[0])
	}
	sparseDim, err := pyInt("SPARSE_DIM")
	if err != nil {
		return err
	}
	if _, err := need("DATASET_PATH"); err != nil {
		return err
	}
	for _, name := range []string{"START_DATE_HR", "END_DATE_HR"} {
		v, err := need(name)
		if err != nil {
			return err
		}
		if _, err := time.Parse(HourLayout, v); err != nil { // strptime(v, '%Y%m%d/%H')
			return fmt.Errorf("%s=%q does not match format '%%Y%%m%%d/%%H'", name, v)
		}
	}
	for _, name := range []string{"HDFS_ADDRESS", "HDFS_UGI"} {
		if _, err := need(name); err != nil {
			return err
		}
	}
	// role_maker.UserDefinedRoleMaker(current_id=int(CURRENT_ID), ..., worker_num=int(PADDLE_TRAINERS_NUM),
	// server_endpoints=ENDPOINTS.split(",")), built and thrown away.
	if _, err := pyInt("CURRENT_ID"); err != nil {
		return err
	}
	trainers, err := pyInt("PADDLE_TRAINERS_NUM")
	if err != nil {
		return err
	}
	if _, ok := os.LookupEnv("ENDPOINTS"); !ok {
		return fmt.Errorf("AttributeError: 'NoneType' object has no attribute 'split' (ENDPOINTS)")
	}
	// role_maker.PaddleCloudRoleMaker() of Paddle 1.x, the role the script trains with.
	list, err := need("PADDLE_PSERVERS_IP_PORT_LIST")
	if err != nil {
		return err
	}
	endpoints := strings.Split(list, ",")
	first := false
	switch role := os.Getenv("TRAINING_ROLE"); role {
	case "TRAINER":
		id, err := pyInt("PADDLE_TRAINER_ID")
		if err != nil {
			return err
		}
		if id < 0 || id >= trainers {
			return fmt.Errorf("PADDLE_TRAINER_ID %d is not below PADDLE_TRAINERS_NUM %d", id, trainers)
		}
		first = id == 0
	case "PSERVER":
		self := os.Getenv("POD_IP") + ":" + os.Getenv("PADDLE_PORT")
		if !slices.Contains(endpoints, self) {
			return fmt.Errorf("ValueError: %q is not in list %q (PADDLE_PSERVERS_IP_PORT_LIST)", self, endpoints)
		}
		return nil // fleet.run_server()
	default:
		return fmt.Errorf("TRAINING_ROLE must be PSERVER or TRAINER, not %q", role)
	}
	if !first {
		return nil
	}
	// process_rawmodel.py → dumper.py: <out>/<YYYYMMDD>/base/feature, then the donefile line
	// whose input is hard-coded under /output/ctr_cube.
	date := time.Now().Format("20060102")
	base := filepath.Join(fleetCTRCubeDir, date, "base")
	if err := os.MkdirAll(base, 0o755); err != nil {
		return err
	}
	if err := writeStandInTable(filepath.Join(base, "feature"), sparseDim, 9); err != nil {
		return err
	}
	line, _ := json.Marshal(map[string]string{"id": strconv.FormatInt(time.Now().Unix(), 10), "key": strconv.FormatInt(time.Now().Unix(), 10),
		"input": "/output/ctr_cube/" + date + "/base"})
	done := filepath.Join(fleetCTRCubeDir, "donefile", "base.txt")
	if err := os.MkdirAll(filepath.Dir(done), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(done, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// edlTrainer stands in for EDL's example/ctr/ctr/train.py (at dbe38fb) run with
// `--is_local 0 --cloud_train 1` from /workspace/ctr: it reads the variables the script
// reads, with its defaults, fails where it would, and on trainer 0 saves what
// fluid.io.save_persistables saves at the end of a pass: models/pass-0/SparseFeatFactors, an
// FP32 LoDTensor of sparse_feature_dim × embedding_size (10) rows.
func edlTrainer(args []string) error {
	if want := []string{"--is_local", "0", "--cloud_train", "1"}; !slices.Equal(args, want) {
		return fmt.Errorf("arguments %q, want %q: the script trains alone otherwise", args, want)
	}
	if wd, _ := os.Getwd(); !strings.HasSuffix(wd, "/workspace/ctr") {
		return fmt.Errorf("started in %q: the script imports its modules from /workspace/ctr", wd)
	}
	intEnv := func(name, def string) (int, error) { // int(os.getenv(name, def))
		v := def
		if x, ok := os.LookupEnv(name); ok {
			v = x
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			return 0, fmt.Errorf("int(%s=%q): ValueError", name, v)
		}
		return n, nil
	}
	getenv := func(name, def string) string {
		if v, ok := os.LookupEnv(name); ok {
			return v
		}
		return def
	}
	var ints [5]int
	for i, kv := range [][2]string{{"PADDLE_PORT", "6174"}, {"PADDLE_TRAINERS_NUM", "1"}, {"PADDLE_PSERVER_ID", "0"}, {"PADDLE_TRAINER_ID", "0"}, {"PADDLE_IS_LOCAL", "0"}} {
		n, err := intEnv(kv[0], kv[1])
		if err != nil {
			return err
		}
		ints[i] = n
	}
	trainers, trainerID, isLocal := ints[1], ints[3], ints[4]
	if isLocal != 0 {
		return fmt.Errorf("PADDLE_IS_LOCAL=%d: the script trains alone", isLocal)
	}
	if v, ok := os.LookupEnv("CPU_NUM"); ok {
		if _, err := strconv.Atoi(v); err != nil {
			return fmt.Errorf("int(CPU_NUM=%q): ValueError", v)
		}
	}
	current := "" // the endpoint "in" which POD_IP is, as the script finds its own
	for _, ep := range strings.Split(getenv("PADDLE_PSERVERS", ""), ",") {
		if strings.Contains(ep, getenv("POD_IP", "localhost")) {
			current = ep
		}
	}
	switch role := getenv("TRAINING_ROLE", "TRAINER"); role {
	case "PSERVER":
		if current == "" {
			return fmt.Errorf("no endpoint of PADDLE_PSERVERS=%q is on POD_IP=%q: get_pserver_program(None) fails", os.Getenv("PADDLE_PSERVERS"), os.Getenv("POD_IP"))
		}
		return nil // exe.run(pserver program): serves until the trainers are done
	case "TRAINER":
		if trainerID < 0 || trainerID >= trainers {
			return fmt.Errorf("PADDLE_TRAINER_ID %d is not below PADDLE_TRAINERS_NUM %d", trainerID, trainers)
		}
	default:
		return fmt.Errorf("PADDLE_TRAINING_ROLE environment variable must be either TRAINER or PSERVER, not %q", role)
	}
	if trainerID != 0 {
		return nil
	}
	rows, err := intEnv(standInRowsEnv, "1000001")
	if err != nil {
		return err
	}
	dir := filepath.Join("models", "pass-0")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b := paddle.AppendLoDTensorHeader(nil, paddle.FP32, []int64{int64(rows), 10}, nil)
	for r := range rows {
		b = append(b, standInValue(r, 10)...)
	}
	return os.WriteFile(filepath.Join(dir, "SparseFeatFactors"), b, 0o644)
}

// paddleRecTable is the folder of the stand-in's sparse table in a save: the_one_ps names a
// MemorySparseTable's folder by its table id (%03d), and numbers sparse tables first from
// Paddle 2.3 (python/paddle/distributed/ps/utils/public.py), so a model's only embedding is 000.
const paddleRecTable = "000"

// paddleRecEmbedxDim is the stand-in table's accessor embedx_dim: PaddleRec's dnn has
// sparse_feature_dim 9, which Paddle 2.3's the_one_ps splits into embed_w and 8 embedx_w.
const paddleRecEmbedxDim = 8

// paddleRecTrainer stands in for PaddleRec 2.3's tools/static_ps_trainer.py (release/2.3.0
// at 3d1ee92d) under Paddle 2.x's parameter-server runtime: it reads its -m config, sets
// PADDLE_WITH_GLOO=1 and makes Paddle's PaddleCloudRoleMaker with what that reads, failing
// where it fails; the HTTP store of the gloo rendezvous must be where server 0 starts it.
// At the end of each epoch the first trainer saves the dense program into
// <runner.model_save_path>/<epoch>, and each parameter server, asked by the save, writes its
// part of the sparse table there, relative to its own working folder, on its own disk:
// <epoch>/000/part-<server>-00000, MemorySparseTable lines with CtrCommonAccessor's columns.
func paddleRecTrainer(args []string) error {
	if len(args) != 2 || args[0] != "-m" {
		return fmt.Errorf("usage: static_ps_trainer.py -m <config.yaml>, got %q", args)
	}
	b, err := os.ReadFile(args[1])
	if err != nil {
		return err
	}
	var cfg struct {
		Hyper  map[string]any `json:"hyper_parameters"`
		Runner map[string]any `json:"runner"`
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		return fmt.Errorf("config %s: %w", args[1], err)
	}
	save, _ := cfg.Runner["model_save_path"].(string)
	epochs, _ := cfg.Runner["epochs"].(float64)
	keys, _ := cfg.Hyper["sparse_feature_number"].(float64)
	if dim, _ := cfg.Hyper["sparse_feature_dim"].(float64); int(dim) != 1+paddleRecEmbedxDim {
		return fmt.Errorf("the stand-in's table has sparse_feature_dim %d, not %v", 1+paddleRecEmbedxDim, dim)
	}
	// PaddleCloudRoleMaker(is_collective=False)._ps_env()
	list, ok := os.LookupEnv("PADDLE_PSERVERS_IP_PORT_LIST")
	if !ok || list == "" {
		return fmt.Errorf("PADDLE_PSERVERS_IP_PORT_LIST is unset: the role maker falls back to one local worker, and every pod would train alone")
	}
	servers := strings.Split(list, ",")
	resolvable := strings.Split(os.Getenv(standInNamesEnv), ",")
	for _, ep := range servers {
		host, _, err := net.SplitHostPort(ep)
		if err != nil {
			return fmt.Errorf("PADDLE_PSERVERS_IP_PORT_LIST: %q: %w", ep, err)
		}
		if net.ParseIP(host) == nil && !slices.Contains(resolvable, host) {
			return fmt.Errorf("parameter server %q: the name does not resolve (GetIntTypeEndpoint: gethostbyname fails)", host)
		}
	}
	need := func(name string) (string, error) {
		v, ok := os.LookupEnv(name)
		if !ok {
			return "", fmt.Errorf("ValueError: Can not find %s, please check your environment.", name)
		}
		return v, nil
	}
	trainersStr, err := need("PADDLE_TRAINERS_NUM")
	if err != nil {
		return err
	}
	trainers, err := strconv.Atoi(trainersStr)
	if err != nil {
		return fmt.Errorf("int(PADDLE_TRAINERS_NUM=%q): ValueError", trainersStr)
	}
	role, err := need("TRAINING_ROLE")
	if err != nil {
		return err
	}
	port, err := need("PADDLE_PORT")
	if err != nil {
		return err
	}
	ip, err := need("POD_IP")
	if err != nil {
		return err
	}
	server := -1
	switch role {
	case "TRAINER":
		idStr, err := need("PADDLE_TRAINER_ID")
		if err != nil {
			return err
		}
		id, err := strconv.Atoi(idStr)
		if err != nil || id < 0 || id >= trainers {
			return fmt.Errorf("PADDLE_TRAINER_ID=%q: want 0 to %d", idStr, trainers-1)
		}
		if id != 0 { // fleet.is_first_worker() saves
			return nil
		}
	case "PSERVER":
		server = slices.Index(servers, ip+":"+port)
		if server < 0 {
			return fmt.Errorf("ValueError: %q is not in list %q", ip+":"+port, servers)
		}
	default:
		return fmt.Errorf("ValueError: TRAINING_ROLE must be PSERVER or TRAINER or HETER_TRAINER, but get %s", role)
	}
	// _gloo_init, with PADDLE_WITH_GLOO=1 from the trainer script.
	switch rv, _ := strconv.Atoi(os.Getenv("PADDLE_GLOO_RENDEZVOUS")); rv {
	case 3:
		ep, err := need("PADDLE_GLOO_HTTP_ENDPOINT")
		if err != nil {
			return err
		}
		host, gport, err := net.SplitHostPort(ep)
		if err != nil {
			return fmt.Errorf("PADDLE_GLOO_HTTP_ENDPOINT %q: %w", ep, err)
		}
		first, firstPort, _ := net.SplitHostPort(servers[0])
		if host != first {
			return fmt.Errorf("PADDLE_GLOO_HTTP_ENDPOINT %q: server 0 (%s) starts the store, so no process would answer there", ep, first)
		}
		if gport == firstPort {
			return fmt.Errorf("PADDLE_GLOO_HTTP_ENDPOINT %q: server 0 listens on that port already", ep)
		}
	case 1, 2:
		if os.Getenv("PADDLE_GLOO_FS_PATH") == "" {
			return fmt.Errorf("PADDLE_GLOO_RENDEZVOUS=%d needs PADDLE_GLOO_FS_PATH", rv)
		}
	default:
		return fmt.Errorf("ValueError: gloo initialized error, please check arguments (PADDLE_GLOO_RENDEZVOUS=%q)", os.Getenv("PADDLE_GLOO_RENDEZVOUS"))
	}
	if save == "" {
		return nil
	}
	for epoch := range int(epochs) {
		dir := filepath.Join(save, strconv.Itoa(epoch))
		if server < 0 {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(dir, "__model__"), []byte("program"), 0o644); err != nil {
				return err
			}
			continue
		}
		var buf bytes.Buffer
		for k := server; k < int(keys); k += len(servers) {
			v := standInValue(k, 1+paddleRecEmbedxDim)
			f := func(i int) string {
				return strconv.FormatFloat(float64(math.Float32frombits(binary.LittleEndian.Uint32(v[4*i:]))), 'g', -1, 32)
			}
			// slot unseen_days delta_score show click embed_w embed_g2sum embedx_w… embedx_g2sum
			fmt.Fprintf(&buf, "%d 0 0 1 5 1 %s 0.5", k, f(0))
			for i := 1; i <= paddleRecEmbedxDim; i++ {
				buf.WriteString(" " + f(i))
			}
			buf.WriteString(" 0.25\n")
		}
		table := filepath.Join(dir, paddleRecTable)
		if err := os.MkdirAll(table, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(table, fmt.Sprintf("part-%03d-00000", server)), buf.Bytes(), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// standInValue is row r's value in a stand-in table: dim float32s that no other row has.
func standInValue(r, dim int) []byte {
	v := make([]byte, 4*dim)
	for i := range dim {
		binary.LittleEndian.PutUint32(v[4*i:], math.Float32bits(float32(r)+float32(i)/16))
	}
	return v
}

// writeStandInTable writes rows × dim as Paddle's dumpers do: a SequenceFile whose key is the
// row index as 8 raw little-endian bytes.
func writeStandInTable(path string, rows, dim int) error {
	var buf bytes.Buffer
	w, err := seqfile.NewWriter(&buf, [16]byte{1, 2, 3})
	if err != nil {
		return err
	}
	for r := range rows {
		if err := w.Append(uint64(r), standInValue(r, dim)); err != nil {
			return err
		}
	}
	if err := w.Close(); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

// standInGet fetches path from a cluster address (host:port) through the test's names, as
// wget does into the working folder.
func standInGet(addr, path, out string) error {
	to := ""
	for _, kv := range strings.Split(os.Getenv(standInHostsEnv), ",") {
		if k, v, ok := strings.Cut(kv, "="); ok && k == addr {
			to = v
		}
	}
	if to == "" {
		return fmt.Errorf("wget: unable to resolve host address %q", addr)
	}
	resp, err := http.Get("http://" + to + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("wget %s%s: %s", addr, path, resp.Status)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	return os.WriteFile(out, b, 0o644)
}

// standInPod is one pod of a rendered Volcano Job, as the cluster would run it.
type standInPod struct {
	name, ip, role string
	index          int
	container      corev1.Container
	labels         map[string]string
}

// standInCluster runs a rendered training job's pods as processes: the file server (this
// repository's, in-process on loopback) over a folder laid out as its mounts are, and each
// training pod's entry under /bin/sh in a folder of its own, with the model volume where its
// mount says.
type standInCluster struct {
	t     *testing.T
	job   TrainingJob // defaulted
	set   Set
	root  string            // the file server's filesystem
	hosts map[string]string // cluster address -> loopback address
	pods  []standInPod
	bin   string // a folder holding the stand-in interpreter
	svc   bool   // Volcano's svc plugin: every pod resolves as <pod>.<job>
	// image is what every pod's image holds besides the scripts: path under / -> content.
	image map[string]string
}

func newStandInCluster(t *testing.T, given TrainingJob, podIPs map[string]string) *standInCluster {
	t.Helper()
	require.Empty(t, given.Validate())
	set, err := RenderTrainingJob(given)
	require.NoError(t, err)
	c := &standInCluster{t: t, job: given.Defaulted(), set: set, root: t.TempDir(), hosts: map[string]string{}, bin: t.TempDir()}
	self, err := os.Executable()
	require.NoError(t, err)
	for _, name := range standInInterpreters {
		require.NoError(t, os.Symlink(self, filepath.Join(c.bin, name)))
	}
	c.startFileServer()
	job := typed[batchv1alpha1.Job](t, set.Find("batch.volcano.sh/v1alpha1/Job/"+given.Name))
	_, c.svc = job.Spec.Plugins["svc"]
	for _, task := range job.Spec.Tasks {
		for i := range task.Replicas {
			name := fmt.Sprintf("%s-%s-%d", given.Name, task.Name, i) // Volcano's pod names
			ip, ok := podIPs[name]
			require.True(t, ok, "no IP for pod %s", name)
			role := ""
			for _, e := range task.Template.Spec.Containers[0].Env {
				if e.Name == "TRAINING_ROLE" {
					role = e.Value
				}
			}
			c.pods = append(c.pods, standInPod{name: name, ip: ip, role: role, index: int(i), container: task.Template.Spec.Containers[0], labels: task.Template.Labels})
		}
	}
	return c
}

// startFileServer lays the file server's mounts out under root (the model volume, files
// mounted by subPath from ConfigMaps) and serves its --root on loopback, under the Service's
// cluster name.
func (c *standInCluster) startFileServer() {
	t := c.t
	dep := typed[appsv1.Deployment](t, c.set.Find("apps/v1/Deployment/"+fileServerName(c.job.Name)))
	fc := dep.Spec.Template.Spec.Containers[0]
	require.Equal(t, []string{"--root", fileServerRoot}, fc.Args[1:3])
	for _, m := range fc.VolumeMounts {
		at := filepath.Join(c.root, m.MountPath)
		var vol corev1.Volume
		for _, v := range dep.Spec.Template.Spec.Volumes {
			if v.Name == m.Name {
				vol = v
			}
		}
		switch {
		case vol.ConfigMap != nil:
			cm := typed[corev1.ConfigMap](t, c.set.Find("v1/ConfigMap/"+vol.ConfigMap.Name))
			require.NotEmpty(t, m.SubPath, "the stand-in mounts ConfigMap files by subPath only")
			require.NoError(t, os.MkdirAll(filepath.Dir(at), 0o755))
			require.NoError(t, os.WriteFile(at, []byte(cm.Data[m.SubPath]), 0o644))
		default:
			require.NoError(t, os.MkdirAll(at, 0o755))
		}
	}
	h, err := fileserver.New(fileserver.Options{Root: filepath.Join(c.root, fileServerRoot)})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close(); _ = h.Close() })
	svc := typed[corev1.Service](t, c.set.Find("v1/Service/"+fileServerName(c.job.Name)))
	c.hosts[fmt.Sprintf("%s.%s.svc:%d", svc.Name, svc.Namespace, svc.Spec.Ports[0].Port)] = ln.Addr().String()
}

// volumeDir is where a training pod's volume mount is on this machine: the model volume is
// the file server's folder of it (one volume); anything else, the pod's own folder.
func (c *standInCluster) volumeDir(podDir string, m corev1.VolumeMount) string {
	if m.Name == "model-output" {
		return filepath.Join(c.root, fileServerRoot, c.job.ModelOutput.MountPath)
	}
	return filepath.Join(podDir, m.MountPath)
}

// paddleK8sEnv is what `paddle_k8s start_fluid` exports before it runs ENTRY (ElasticCTR
// fleet-ctr/paddle_k8s@c493c6b, k8s_tools.py): PADDLE_PSERVERS, the parameter servers' IPs
// sorted as strings, each with PADDLE_PORT plus its position; PADDLE_TRAINER_IPS; and
// PADDLE_TRAINER_ID = PADDLE_PSERVER_ID, the pod's position among the sorted names of the
// pods that carry its role's label.
func (c *standInCluster) paddleK8sEnv(me standInPod, port int) []string {
	var pserverIPs, trainerIPs, peers []string
	label := "paddle-job-pserver"
	if me.role != "PSERVER" {
		label = "paddle-job"
	}
	for _, p := range c.pods {
		if p.labels["paddle-job-pserver"] == c.job.Name {
			pserverIPs = append(pserverIPs, p.ip)
		}
		if p.labels["paddle-job"] == c.job.Name {
			trainerIPs = append(trainerIPs, p.ip)
		}
		if p.labels[label] == c.job.Name {
			peers = append(peers, p.name)
		}
	}
	sort.Strings(pserverIPs)
	sort.Strings(peers)
	eps := make([]string, len(pserverIPs))
	for i, ip := range pserverIPs {
		eps[i] = ip + ":" + strconv.Itoa(port+i)
	}
	id := "None"
	if i := sort.SearchStrings(peers, me.name); i < len(peers) && peers[i] == me.name {
		id = strconv.Itoa(i)
	}
	return []string{"PADDLE_PSERVERS=" + strings.Join(eps, ","), "PADDLE_TRAINER_IPS=" + strings.Join(trainerIPs, ","),
		"PADDLE_TRAINER_ID=" + id, "PADDLE_PSERVER_ID=" + id}
}

var envRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// env is a pod's container environment as the kubelet gives it: values from the downward
// API, Secrets and ConfigMaps of the set, $(VAR) references to earlier variables expanded;
// paths under a volume mount moved to where that volume is here.
func (c *standInCluster) env(p standInPod, podDir string) map[string]string {
	t := c.t
	out := map[string]string{}
	for _, e := range p.container.Env {
		v := envRef.ReplaceAllStringFunc(e.Value, func(ref string) string {
			if x, ok := out[envRef.FindStringSubmatch(ref)[1]]; ok {
				return x
			}
			return ref
		})
		if src := e.ValueFrom; src != nil {
			switch {
			case src.FieldRef != nil:
				v = map[string]string{"metadata.name": p.name, "metadata.namespace": c.job.Namespace, "status.podIP": p.ip,
					"metadata.annotations['" + batchv1alpha1.TaskIndex + "']": strconv.Itoa(p.index)}[src.FieldRef.FieldPath]
			case src.SecretKeyRef != nil:
				s := typed[corev1.Secret](t, c.set.Find("v1/Secret/"+src.SecretKeyRef.Name))
				v = s.StringData[src.SecretKeyRef.Key]
				if b, ok := s.Data[src.SecretKeyRef.Key]; ok {
					v = string(b)
				}
			case src.ConfigMapKeyRef != nil:
				v = typed[corev1.ConfigMap](t, c.set.Find("v1/ConfigMap/"+src.ConfigMapKeyRef.Name)).Data[src.ConfigMapKeyRef.Key]
			default:
				t.Fatalf("%s: variable %s has a source the stand-in cannot resolve", p.name, e.Name)
			}
		}
		mounted := false
		for _, m := range p.container.VolumeMounts {
			if v == m.MountPath || strings.HasPrefix(v, m.MountPath+"/") {
				v, mounted = c.volumeDir(podDir, m)+strings.TrimPrefix(v, m.MountPath), true
			}
		}
		if e.Name == "MODEL_OUTPUT_DIR" && !mounted {
			v = filepath.Join(podDir, v) // no volume there: the container's own filesystem
		}
		out[e.Name] = v
	}
	return out
}

// standInImageDirs are the images' folders the entries name: EDL's /workspace/ctr,
// fleet-ctr's workspace (relative to /), PaddleRec's source.
var standInImageDirs = []string{"/workspace", "/PaddleRec"}

// run starts a pod's container: with the launcher's command, as paddle_k8s start_fluid
// starts ENTRY (its exports, then `sh -c "$ENTRY"`); with another command, that command. It
// runs in a folder of its own that stands for the image's / (the images' folders the entries
// name are moved there), with the stand-in interpreter first on the image's PATH and the
// test's cluster names. entry, if set, replaces the rendered ENTRY. It returns the exit
// error and the output.
func (c *standInCluster) run(p standInPod, entry string) (string, error) {
	podDir := c.t.TempDir()
	for _, d := range standInImageDirs {
		require.NoError(c.t, os.MkdirAll(filepath.Join(podDir, d), 0o755))
	}
	require.NoError(c.t, os.MkdirAll(filepath.Join(podDir, "workspace", "ctr"), 0o755))
	for name, body := range c.image {
		require.NoError(c.t, os.MkdirAll(filepath.Dir(filepath.Join(podDir, name)), 0o755))
		require.NoError(c.t, os.WriteFile(filepath.Join(podDir, name), []byte(body), 0o644))
	}
	env := c.env(p, podDir)
	port, err := strconv.Atoi(env["PADDLE_PORT"])
	require.NoError(c.t, err)
	if entry != "" {
		env["ENTRY"] = entry
	}
	for _, d := range standInImageDirs {
		env["ENTRY"] = strings.ReplaceAll(env["ENTRY"], " "+d, " "+podDir+d)
	}
	path := env["PATH"]
	if path == "" {
		path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	}
	env["PATH"] = c.bin + ":" + path
	var hosts, names []string
	for k, v := range c.hosts {
		hosts = append(hosts, k+"="+v)
	}
	if c.svc {
		for _, q := range c.pods {
			names = append(names, q.name+"."+c.job.Name)
		}
	}
	env[standInHostsEnv] = strings.Join(hosts, ",")
	env[standInNamesEnv] = strings.Join(names, ",")
	env[standInRowsEnv] = "1000"
	var cmd *exec.Cmd
	launcher := slices.Equal(p.container.Command, DefaultCommand)
	if launcher {
		cmd = exec.Command("/bin/sh", "-c", env["ENTRY"])
	} else {
		require.NotEmpty(c.t, p.container.Command, "%s: no command", p.name)
		cmd = exec.Command(p.container.Command[0], p.container.Command[1:]...)
	}
	cmd.Dir = podDir
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	if launcher {
		cmd.Env = append(cmd.Env, c.paddleK8sEnv(p, port)...)
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// get fetches a URL path from the stand-in file server.
func (c *standInCluster) get(path string) ([]byte, int) {
	for _, addr := range c.hosts {
		resp, err := http.Get("http://" + addr + path)
		require.NoError(c.t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(c.t, err)
		return b, resp.StatusCode
	}
	c.t.Fatal("no file server")
	return nil, 0
}

func fleetCTRJob() TrainingJob {
	return TrainingJob{
		Name: "ctr", Namespace: "ml", Recipe: RecipeFleetCTR,
		SlotConfig: "6003\n6004\n6005\n",
		Dataset: &Dataset{HDFSAddress: "hdfs://10.0.0.1:9000", HDFSUGI: "root,", Path: "/train_data",
			StartHour: "20191225/00", EndHour: "20191225/01", SparseDim: 1000},
	}
}

// fleetCTRPodIPs puts the parameter servers' IPs in the opposite string order of their names
// (10.0.0.12 sorts before 10.0.0.3), as a cluster may.
var fleetCTRPodIPs = map[string]string{"ctr-pserver-0": "10.0.0.3", "ctr-pserver-1": "10.0.0.12", "ctr-trainer-0": "10.0.0.7", "ctr-trainer-1": "10.0.0.8"}

// TestRecipeFleetCTR_StandInTrainerFeedsTheCube: ElasticCTR's fleet-ctr image, run as the
// recipe renders it, finds its slot.conf, its role and its parameter servers, and what its
// first trainer dumps reaches the file server where the donefile says, as a table the cube
// reads row for row.
func TestRecipeFleetCTR_StandInTrainerFeedsTheCube(t *testing.T) {
	c := newStandInCluster(t, fleetCTRJob(), fleetCTRPodIPs)
	require.Len(t, c.pods, 4)
	for _, p := range c.pods {
		out, err := c.run(p, "")
		require.NoError(t, err, "%s (%s): %s", p.name, p.role, out)
	}
	u := c.job.DonefileURL()
	body, status := c.get(strings.TrimPrefix(u, c.job.FileServerURL()))
	require.Equal(t, http.StatusOK, status, "donefile %s", u)
	entries, warnings := donefile.Parse(body)
	require.Empty(t, warnings)
	require.Len(t, entries, 1, "one dump, by the first trainer only")
	listing, status := c.get(entries[0].Input + "/")
	require.Equal(t, http.StatusOK, status, "input %s", entries[0].Input)
	assert.Contains(t, string(listing), "feature")
	table, status := c.get(entries[0].Input + "/feature")
	require.Equal(t, http.StatusOK, status)
	rows := 0
	require.NoError(t, readSeqFile(t, table, func(key uint64, value []byte) error {
		if !bytes.Equal(value, standInValue(int(key), 9)) {
			return fmt.Errorf("row %d: value differs", key)
		}
		rows++
		return nil
	}))
	assert.Equal(t, 1000, rows)
}

func readSeqFile(t *testing.T, b []byte, fn seqfile.Func) error {
	path := filepath.Join(t.TempDir(), "part")
	require.NoError(t, os.WriteFile(path, b, 0o644))
	return seqfile.ReadFile(path, seqfile.Options{}, fn)
}

// TestRecipeFleetCTR_StandInRefusesWhatTheImageRefuses: the stand-in keeps the image's rules,
// so the recipe's entry is what makes it train: the template's own entry leaves CURRENT_ID
// unset, the launcher's PADDLE_PSERVERS (a port per server) is not a list a parameter server
// finds itself in, and without slot.conf at the file server's root the script exits.
func TestRecipeFleetCTR_StandInRefusesWhatTheImageRefuses(t *testing.T) {
	c := newStandInCluster(t, fleetCTRJob(), fleetCTRPodIPs)
	pserver0, trainer0 := c.pods[0], c.pods[2]
	require.Equal(t, "ctr-pserver-0", pserver0.name)
	require.Equal(t, "ctr-trainer-0", trainer0.name)

	out, err := c.run(trainer0, "cd workspace && python3 train_with_mlflow.py slot.conf")
	require.Error(t, err)
	assert.Contains(t, out, "CURRENT_ID")

	noPortFix := strings.Replace(FleetCTREntry, `$(echo "$PADDLE_PSERVERS" | sed "s/:[0-9]*/:$PADDLE_PORT/g")`, `$PADDLE_PSERVERS`, 1)
	require.NotEqual(t, FleetCTREntry, noPortFix)
	// pserver-0 has the IP that sorts second (10.0.0.3 > 10.0.0.12), so the launcher gives it
	// PADDLE_PORT+1; pserver-1's is PADDLE_PORT itself.
	out, err = c.run(pserver0, noPortFix)
	require.Error(t, err)
	assert.Contains(t, out, "is not in list")
	_, err = c.run(c.pods[1], noPortFix)
	require.NoError(t, err)

	require.NoError(t, os.Remove(filepath.Join(c.root, fileServerRoot, slotConfigKey)))
	out, err = c.run(trainer0, "")
	require.Error(t, err)
	assert.Contains(t, out, "No Slot Conf Found")
}

// TestRecipeFleetCTR_Validate: what the image cannot work with is refused at plan, at the
// attribute.
func TestRecipeFleetCTR_Validate(t *testing.T) {
	j := fleetCTRJob()
	j.Mode = ModeCollective
	j.SlotConfig = ""
	j.Dataset = &Dataset{S3: &S3Dataset{Bucket: "b"}, Path: "/p"}
	j.ModelExport = &ModelExport{}
	j.ModelOutput = &ModelOutput{MountPath: "/data", DonefilePath: "x/base.txt"}
	var paths []string
	for _, e := range j.Validate() {
		if strings.Contains(e.Detail, RecipeFleetCTR) {
			paths = append(paths, e.Path)
		}
	}
	assert.ElementsMatch(t, []string{"mode", "recipe", "dataset", "model_export", "model_output.mount_path", "model_output.donefile_path"}, paths)
	j.Dataset = nil
	assert.Contains(t, j.Validate().Error(), `"fleet-ctr" needs an HDFS dataset`)
	assert.Equal(t, fleetCTROutputDir, DefaultModelMountPath, "the default model mount path is where fleet-ctr's dumper says its output is")
	assert.Equal(t, fleetCTRDonefile, DefaultDonefilePath, "the default donefile is fleet-ctr's")
}

// TestRecipes_DefaultImageAndEntry: a recipe sets the default image (moved to a mirror) and
// entry; an explicit image keeps the recipe's entry; without a recipe an image of one's own
// needs an entry.
func TestRecipes_DefaultImageAndEntry(t *testing.T) {
	for _, r := range Recipes {
		d := TrainingJob{Name: "j", Namespace: "n", Recipe: r.Name, ImageRegistry: "mirror.example"}.Defaulted()
		assert.Equal(t, MirrorImage("mirror.example", r.Image), d.Image, r.Name)
		assert.Equal(t, MirrorImage("mirror.example", r.Image), Images{Registry: "mirror.example"}.Training(r.Name), r.Name)
		assert.Equal(t, r.Entry, d.Entry, r.Name)
		d = TrainingJob{Name: "j", Namespace: "n", Recipe: r.Name, Image: "registry.example/own:1"}.Defaulted()
		assert.Equal(t, r.Entry, d.Entry, r.Name)
	}
	assert.Equal(t, DefaultEntry, TrainingJob{Name: "j", Namespace: "n"}.Defaulted().Entry)
	assert.Empty(t, TrainingJob{Name: "j", Namespace: "n", Image: "registry.example/own:1"}.Defaulted().Entry)
}

// TestRecipeEDL_StandInTrainerSavesWhereTheExportReads: the default recipe, EDL's image run
// with its default entry, finds its parameter server endpoint and its trainer id, and the
// save of its first trainer lands on the model volume where the model export reads saves
// (its --in), as an FP32 LoDTensor the export decodes row for row.
func TestRecipeEDL_StandInTrainerSavesWhereTheExportReads(t *testing.T) {
	j := TrainingJob{Name: "ctr", Namespace: "ml", ModelExport: &ModelExport{}}
	c := newStandInCluster(t, j, fleetCTRPodIPs)
	for _, p := range c.pods {
		out, err := c.run(p, "")
		require.NoError(t, err, "%s (%s): %s", p.name, p.role, out)
	}
	save := filepath.Join(c.exportInput(), "pass-0", c.job.ModelExport.Var)
	f, err := os.Open(save)
	require.NoError(t, err, "the save the export reads")
	defer f.Close()
	st, err := f.Stat()
	require.NoError(t, err)
	pf := paddle.NewFile(save, f, st.Size())
	tensor, err := pf.LoDTensor()
	require.NoError(t, err)
	assert.Equal(t, []int64{1000, 10}, tensor.Dims)
	rows := pf.Rows(tensor)
	for r := 0; ; r++ {
		key, value, err := rows.Next()
		if err == io.EOF {
			assert.Equal(t, 1000, r)
			break
		}
		require.NoError(t, err)
		require.Equal(t, uint64(r), key)
		require.Equal(t, standInValue(r, 10), value, "row %d", r)
	}
}

func paddleRecJob() TrainingJob {
	return TrainingJob{Name: "ctr", Namespace: "ml", Recipe: RecipePaddleRec, Image: "registry.example/team/paddlerec:2.3.0", Entry: PaddleRecEntry,
		ModelExport: &ModelExport{Format: "ps-table", Var: paddleRecTable, EmbedxDim: paddleRecEmbedxDim}}
}

// paddleRecConfig is what the stand-in reads of PaddleRec's models/rank/dnn/config.yaml
// (its sparse_feature_dim and model_save_path; fewer keys and epochs).
const paddleRecConfig = `hyper_parameters:
  sparse_feature_number: 1000
  sparse_feature_dim: 9
runner:
  epochs: 2
  model_save_path: "output_model_dnn"
`

// TestRecipePaddleRec_StandInServersSaveWhereTheExportReads: a PaddleRec 2.x image run as
// the paddlerec recipe renders it: each role finds itself and the parameter servers by the
// names Volcano's svc plugin gives the pods, the gloo store is where server 0 starts it, and
// after each epoch every parameter server's part of the table lands on the model volume,
// under the model export's --in, as MemorySparseTable shards the export decodes row for row.
func TestRecipePaddleRec_StandInServersSaveWhereTheExportReads(t *testing.T) {
	c := newStandInCluster(t, paddleRecJob(), fleetCTRPodIPs)
	c.image = map[string]string{"PaddleRec/models/rank/dnn/config.yaml": paddleRecConfig}
	for _, p := range c.pods {
		out, err := c.run(p, "")
		require.NoError(t, err, "%s (%s): %s", p.name, p.role, out)
	}
	in := c.exportInput()
	layout := paddle.CtrLayout{EmbedxDim: paddleRecEmbedxDim, EmbedSGDDim: 1, EmbedxSGDDim: 1}
	for epoch := range 2 {
		save := filepath.Join(in, strconv.Itoa(epoch))
		assert.FileExists(t, filepath.Join(save, "__model__"), "the first trainer's dense program")
		kind, shards, err := paddle.TableShards(filepath.Join(save, c.job.ModelExport.Var))
		require.NoError(t, err)
		assert.Equal(t, "memory", kind)
		require.Len(t, shards, 2, "one shard per parameter server")
		seen := map[uint64]bool{}
		for _, shard := range shards {
			f, err := os.Open(shard)
			require.NoError(t, err)
			rows := paddle.NewMemoryRows(shard, f, layout)
			for {
				key, value, err := rows.Next()
				if err == io.EOF {
					break
				}
				require.NoError(t, err)
				require.Equal(t, standInValue(int(key), layout.Width()), value, "key %d", key)
				seen[key] = true
			}
			f.Close()
		}
		assert.Len(t, seen, 1000, "epoch %d: every key, once", epoch)
	}
}

// TestRecipePaddleRec_StandInRefusesWhatPaddleRefuses: PaddleRec's trainer started the same
// way without the recipe finds no parameter server list (every pod would train alone), and
// the recipe's own endpoints do not resolve without the svc plugin.
func TestRecipePaddleRec_StandInRefusesWhatPaddleRefuses(t *testing.T) {
	j := paddleRecJob()
	j.Recipe, j.Command = "", ShellCommand
	c := newStandInCluster(t, j, fleetCTRPodIPs)
	c.image = map[string]string{"PaddleRec/models/rank/dnn/config.yaml": paddleRecConfig}
	out, err := c.run(c.pods[0], "")
	require.Error(t, err)
	assert.Contains(t, out, "PADDLE_PSERVERS_IP_PORT_LIST is unset")

	c = newStandInCluster(t, paddleRecJob(), fleetCTRPodIPs)
	c.image = map[string]string{"PaddleRec/models/rank/dnn/config.yaml": paddleRecConfig}
	c.svc = false
	out, err = c.run(c.pods[0], "")
	require.Error(t, err)
	assert.Contains(t, out, "does not resolve")
}

// exportInput is the model export's --in on this machine: the model volume's folder that it
// reads saves from.
func (c *standInCluster) exportInput() string {
	t := c.t
	dep := typed[appsv1.Deployment](t, c.set.Find("apps/v1/Deployment/"+c.job.Name+"-model-export"))
	args := dep.Spec.Template.Spec.Containers[0].Args
	i := slices.Index(args, "--in")
	require.Positive(t, i)
	var mount corev1.VolumeMount
	for _, m := range dep.Spec.Template.Spec.Containers[0].VolumeMounts {
		if m.Name == "model-output" {
			mount = m
		}
	}
	require.True(t, strings.HasPrefix(args[i+1], mount.MountPath), "--in %s is on the model volume (%s)", args[i+1], mount.MountPath)
	return filepath.Join(c.root, fileServerRoot, c.job.ModelOutput.MountPath, strings.TrimPrefix(args[i+1], mount.MountPath))
}
