package stack

import (
	"path"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// A Recipe is a published training image ctr knows how to run: the image, the program the
// launcher (DefaultCommand) starts in it, what else its scripts read from the pod, and what
// they need of the job's settings. Each recipe has a stand-in trainer in the tests that reads
// the same environment and writes the same files as the image's scripts (recipe_test.go).
type Recipe struct {
	// Name is the value of the job's recipe setting.
	Name string
	// Image is the default training image.
	Image string
	// Entry is the default ENTRY: the launcher runs it with `sh -c`. Empty: the job must
	// say it.
	Entry string
	// Command is the default command; nil means DefaultCommand (paddle_k8s start_fluid).
	Command []string
	// namedPods turns Volcano's svc and env plugins on in ps mode: every pod is reachable as
	// <pod>.<job>, and knows its index, so the endpoints can be rendered, not looked up.
	namedPods bool
	// pserversSave mounts the model volume into the parameter servers too: they write their
	// own part of a sparse table when the trainers save.
	pserversSave bool
	// psTrainer names the image's training program when it trains with parameter servers
	// only (mode must be ps); empty: it trains in either mode.
	psTrainer string
	// env is what the recipe adds to every task's environment (pod.env still wins).
	env func(j TrainingJob) []corev1.EnvVar
	// check reports the settings the image's scripts cannot work with (on the job as given;
	// d is the defaulted job).
	check func(j, d TrainingJob, c *checker)
}

// Recipe names.
const (
	RecipeEDL       = "edl"
	RecipeFleetCTR  = "fleet-ctr"
	RecipePaddleRec = "paddlerec"
)

// ShellCommand runs ENTRY in images that have no launcher of their own.
var ShellCommand = []string{"/bin/sh", "-c", `eval "$ENTRY"`}

// PaddleRecEntry is how PaddleRec 2.x's parameter-server trainer starts in an image that
// holds PaddleRec's source at /PaddleRec (PaddleRec publishes no image): the model's config
// saves into runner.model_save_path (output_model_dnn for models/rank/dnn), relative to the
// folder it starts in, on trainers and parameter servers alike (each server writes its part
// of the sparse table there), so that folder is pointed at the model volume first, where the
// model export reads saves (DefaultModelExportPath).
const PaddleRecEntry = `cd /PaddleRec && mkdir -p "$MODEL_OUTPUT_DIR/` + DefaultModelExportPath + `" && ln -sfn "$MODEL_OUTPUT_DIR/` + DefaultModelExportPath +
	`" output_model_dnn && python -u tools/static_ps_trainer.py -m models/rank/dnn/config.yaml`

// paddleRecGlooPortOffset puts the HTTP store through which Paddle's gloo rendezvous
// (PADDLE_WITH_GLOO, set by PaddleRec's trainer) beside the first parameter server's port.
const paddleRecGlooPortOffset = 1

// FleetCTRImage is ElasticCTR's training image, as its elastic-ctr-cli template runs it.
const FleetCTRImage = "hub.baidubce.com/ctr/fleet-ctr:latest"

// fleetCTROutputDir is where ElasticCTR's dumper says its cube input is: it writes
// "/output/ctr_cube/<YYYYMMDD>/base" into the donefile, whatever folder it ran in
// (ElasticCTR save_program/dumper.py), so the model volume must be mounted, and served, there.
const fleetCTROutputDir = "/output"

// fleetCTRCubeDir is the folder ElasticCTR's process_rawmodel.py writes the cube input and
// the donefile into, relative to the trainer's working folder (ctr_cube/<date>/base/feature,
// ctr_cube/donefile/base.txt).
const fleetCTRCubeDir = "ctr_cube"

// fleetCTRDonefile is where fleet-ctr's dumper appends its donefile line, relative to the
// model output.
var fleetCTRDonefile = path.Join(fleetCTRCubeDir, "donefile", "base.txt")

// FleetCTREntry runs ElasticCTR's train_with_mlflow.py as its template does (`cd workspace
// && python3 train_with_mlflow.py slot.conf`), after giving it what that template leaves out:
//   - CURRENT_ID and ENDPOINTS, which the script parses before anything else (int() and
//     split() of unset variables crash it), and PADDLE_PSERVERS_IP_PORT_LIST, which Paddle
//     1.x's PaddleCloudRoleMaker reads. All three come from what paddle_k8s exports: the
//     task index, and PADDLE_PSERVERS, whose ports it increments per parameter server,
//     while each parameter server listens on POD_IP:PADDLE_PORT and finds itself in the list
//     by that address: so every port is set back to PADDLE_PORT;
//   - on trainers, ctr_cube pointed at the model volume, so the SequenceFiles and the
//     donefile line that the first trainer's process_rawmodel.py writes after each hour land
//     where the file server publishes them (the script also pushes them to HDFS, as before).
const FleetCTREntry = `cd workspace && if [ "$TRAINING_ROLE" = TRAINER ]; then mkdir -p "$MODEL_OUTPUT_DIR/` + fleetCTRCubeDir +
	`" && rm -rf ` + fleetCTRCubeDir + ` && ln -s "$MODEL_OUTPUT_DIR/` + fleetCTRCubeDir + `" ` + fleetCTRCubeDir + `; fi && ` +
	`export CURRENT_ID="$PADDLE_TRAINER_ID" ENDPOINTS="$(echo "$PADDLE_PSERVERS" | sed "s/:[0-9]*/:$PADDLE_PORT/g")" && ` +
	`export PADDLE_PSERVERS_IP_PORT_LIST="$ENDPOINTS" && python3 train_with_mlflow.py slot.conf`

// Recipes are the training images ctr knows, the default (EDL's) first.
var Recipes = []Recipe{
	{
		Name:  RecipeEDL,
		Image: DefaultImage,
		Entry: DefaultEntry,
	},
	{
		Name:      RecipeFleetCTR,
		Image:     FleetCTRImage,
		Entry:     FleetCTREntry,
		psTrainer: "train_with_mlflow.py",
		env: func(j TrainingJob) []corev1.EnvVar {
			// train_with_mlflow.py fetches slot.conf with `wget $HOST:$PORT/slot.conf`, the
			// variables Kubernetes would set for a Service named file-server; the file server
			// serves slot_config at its root. Java and Hadoop as ElasticCTR's template sets
			// them: the script runs `hadoop fs` for its samples and its output.
			return []corev1.EnvVar{
				{Name: "FILE_SERVER_SERVICE_HOST", Value: j.fileServerHost()},
				{Name: "FILE_SERVER_SERVICE_PORT", Value: strconv.Itoa(int(j.FileServer.Port))},
				{Name: "JAVA_HOME", Value: "/usr/local/jdk1.8.0_231"},
				{Name: "HADOOP_HOME", Value: "/usr/local/hadoop-2.8.5"},
				{Name: "PATH", Value: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/usr/local/jdk1.8.0_231/bin:/usr/local/hadoop-2.8.5/bin:/Python-3.7.0"},
			}
		},
		check: func(j, d TrainingJob, c *checker) {
			const with = ` with recipe = "` + RecipeFleetCTR + `"`
			// What is missing is blamed on recipe, the line a user can see.
			if j.SlotConfig == "" {
				c.bad("recipe", "%q needs slot_config: train_with_mlflow.py fetches slot.conf from the file server's root, and exits 1 without it", RecipeFleetCTR)
			}
			ds := j.Dataset
			switch {
			case ds == nil:
				c.bad("recipe", "%q needs an HDFS dataset (hdfs_address, hdfs_ugi, path, start_hour, end_hour, sparse_dim): train_with_mlflow.py reads its samples with `hadoop fs`", RecipeFleetCTR)
			case ds.S3 != nil || ds.Volume != nil:
				c.bad("dataset", "must be on HDFS"+with+" (hdfs_address, hdfs_ugi, path, start_hour, end_hour, sparse_dim): train_with_mlflow.py reads its samples with `hadoop fs` only")
			case ds.HDFSAddress == "" || ds.HDFSUGI == "" || ds.SparseDim == 0 || ds.StartHour == "" || ds.EndHour == "":
				c.bad("dataset", "needs hdfs_address, hdfs_ugi, sparse_dim, start_hour and end_hour"+with+
					": train_with_mlflow.py reads HDFS_ADDRESS, HDFS_UGI, SPARSE_DIM, START_DATE_HR and END_DATE_HR and fails without any of them")
			}
			if j.ModelExport != nil {
				c.bad("model_export", "must be left out"+with+": the image writes the cube's SequenceFiles and donefile line itself (process_rawmodel.py)")
			}
			if mp := d.ModelOutput.MountPath; mp != fleetCTROutputDir {
				c.bad("model_output.mount_path", "%q"+with+": ElasticCTR's dumper writes %q into the donefile whatever folder it ran in; use %q",
					mp, path.Join(fleetCTROutputDir, fleetCTRCubeDir, "<date>", "base"), fleetCTROutputDir)
			}
			if dp := d.ModelOutput.DonefilePath; dp != fleetCTRDonefile {
				c.bad("model_output.donefile_path", "%q"+with+": ElasticCTR's dumper appends to %q; use it", dp, fleetCTRDonefile)
			}
		},
	},
	{
		Name:         RecipePaddleRec,
		Command:      ShellCommand,
		namedPods:    true,
		pserversSave: true,
		psTrainer:    "PaddleRec's static_ps_trainer.py",
		env: func(j TrainingJob) []corev1.EnvVar {
			// Paddle 2.x's PaddleCloudRoleMaker in ps mode: the servers' list; a server finds
			// its index as POD_IP:PADDLE_PORT in it, so POD_IP is the pod's own name there,
			// which Paddle's brpc server and clients resolve (GetIntTypeEndpoint). The HTTP
			// store of the gloo rendezvous is started by server 0, at PADDLE_GLOO_HTTP_ENDPOINT.
			port := int(j.Port)
			servers := j.taskHosts("pserver", j.PServer.Replicas, ":"+strconv.Itoa(port))
			return []corev1.EnvVar{
				podNameAsIP(j.Name),
				{Name: "PADDLE_PSERVERS_IP_PORT_LIST", Value: strings.Join(servers, ",")},
				{Name: "PADDLE_TRAINER_ENDPOINTS", Value: strings.Join(j.taskHosts("trainer", j.Trainer.Replicas, ":"+strconv.Itoa(port)), ",")},
				{Name: "PADDLE_TRAINER_ID", ValueFrom: taskIndex()},
				{Name: "PADDLE_GLOO_RENDEZVOUS", Value: "3"},
				{Name: "PADDLE_GLOO_HTTP_ENDPOINT", Value: j.taskHosts("pserver", 1, ":"+strconv.Itoa(port+paddleRecGlooPortOffset))[0]},
			}
		},
		check: func(j, d TrainingJob, c *checker) {
			const with = ` with recipe = "` + RecipePaddleRec + `"`
			if j.Image == "" {
				c.bad("recipe", "%q needs image: PaddleRec publishes no training image; give one with Paddle 2.x and PaddleRec's source", RecipePaddleRec)
			}
			if j.Command == nil && j.Entry == "" {
				c.bad("recipe", "%q needs entry, the command that starts PaddleRec's trainer in your image, e.g. %q", RecipePaddleRec, PaddleRecEntry)
			}
			if me := d.ModelExport; me != nil && me.Format != "ps-table" {
				c.bad("model_export.format", "%q"+with+": the parameter servers save the sparse table as text shards; use format = \"ps-table\"", me.Format)
			}
		},
	},
}

// validate reports the settings the recipe's image cannot work with (on the job as given; d
// is the defaulted job).
func (r *Recipe) validate(j, d TrainingJob, c *checker) {
	if r.psTrainer != "" && d.Mode != ModePS {
		c.bad("mode", "%q with recipe = %q: %s trains with parameter servers; use mode = %q", d.Mode, r.Name, r.psTrainer, ModePS)
	}
	if r.check != nil {
		r.check(j, d, c)
	}
}

// RecipeNames lists the recipes, for the schema's validator and docs.
func RecipeNames() []string {
	names := make([]string, len(Recipes))
	for i, r := range Recipes {
		names[i] = r.Name
	}
	return names
}

// recipe is the job's recipe: the one it names, else EDL's when it runs the default image,
// else none (an image of the user's own, with its own entry).
func (j TrainingJob) recipe() *Recipe {
	if j.Recipe == "" && !j.defaultImage() {
		return nil
	}
	r := j.recipeOrDefault()
	return &r
}

// recipeOrDefault is the recipe the job names, or EDL's (the first) if it names none ctr knows.
func (j TrainingJob) recipeOrDefault() Recipe {
	if i := slices.IndexFunc(Recipes, func(r Recipe) bool { return r.Name == j.Recipe }); i >= 0 {
		return Recipes[i]
	}
	return Recipes[0]
}

// fileServerHost is the file server Service's name as the job's pods resolve it.
func (j TrainingJob) fileServerHost() string {
	return fileServerName(j.Name) + "." + j.Namespace + ".svc"
}
