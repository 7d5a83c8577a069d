package stack

import (
	"fmt"
	"math"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	busv1alpha1 "volcano.sh/apis/pkg/apis/bus/v1alpha1"
)

// Every setting is checked once. A value judged on its own against a bound, a list or a
// pattern declared here is the provider schema's to check (its validators use these
// declarations, so a bad value gets one error, at its attribute). Validate checks the rest:
// values that must be parsed (quantities, URLs, label keys, dates) and values that must agree
// with each other.

// FieldError is a configuration error at an attribute path such as "trainer.replicas"
// (dots between attribute names, [i] for list elements, ["key"] for map entries).
type FieldError struct {
	Path   string
	Detail string
}

func (e FieldError) Error() string { return e.Path + ": " + e.Detail }

// FieldErrors is every error found; rendering refuses settings that have any.
type FieldErrors []FieldError

func (es FieldErrors) Error() string {
	msgs := make([]string, len(es))
	for i, e := range es {
		msgs[i] = e.Error()
	}
	return strings.Join(msgs, "; ")
}

// Bounds of single values.
const (
	MinPort = 1
	MaxPort = 65535
	// MaxNameLength keeps derived names (pods "<job>-trainer-12", "<cube>-shard-255-31",
	// owner label values) within Kubernetes' 63-character limits.
	MaxNameLength      = 40
	MaxNamespaceLength = 63
	// MaxID is the largest user or group id a pod may run as.
	MaxID = math.MaxInt32
)

// Patterns of single values, for the schema's validators.
var (
	// S3BucketPattern is what an S3 (and BOS) bucket name may be.
	S3BucketPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)
	// S3RegionPattern is what a region name may be (AWS's us-east-1, BOS's bj).
	S3RegionPattern = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)
)

// What the patterns allow, for their errors.
const (
	S3BucketRule = "must be a bucket name: 3-63 lowercase letters, digits, dots and hyphens, starting and ending with a letter or digit"
	S3RegionRule = "must be a region name: lowercase letters, digits and hyphens, e.g. us-east-1 or bj"
)

// Defaults shared by every resource.
const (
	DefaultNamespace   = "default"
	DefaultPullPolicy  = string(corev1.PullIfNotPresent)
	DefaultServiceType = string(corev1.ServiceTypeClusterIP)
)

// Resource names become Service names ("<name>-fileserver", "<name>-shard-0", "<name>"), which
// must be DNS-1035 labels: a letter first. Namespaces are DNS-1123 labels.
var (
	NamePattern = regexp.MustCompile(`^[a-z]([-a-z0-9]{0,` + strconv.Itoa(MaxNameLength-2) + `}[a-z0-9])?$`)
	NameRule    = fmt.Sprintf("must be at most %d lowercase letters, digits and '-', starting with a letter and ending with a letter or digit "+
		"(it names Services, which must be DNS-1035 labels)", MaxNameLength)
	NamespacePattern = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,` + strconv.Itoa(MaxNamespaceLength-2) + `}[a-z0-9])?$`)
	NamespaceRule    = fmt.Sprintf("must be at most %d lowercase letters, digits and '-', starting and ending with a letter or digit", MaxNamespaceLength)
)

// Allowed values, for the schema's validators and docs.
var (
	Modes        = []string{ModePS, ModeCollective}
	AccessModes  = []string{AccessReadWriteOnce, AccessReadWriteMany}
	ServiceTypes = []string{string(corev1.ServiceTypeClusterIP), string(corev1.ServiceTypeNodePort), string(corev1.ServiceTypeLoadBalancer)}
	PullPolicies = []string{string(corev1.PullAlways), string(corev1.PullIfNotPresent), string(corev1.PullNever)}
	Events       = []string{string(busv1alpha1.AnyEvent), string(busv1alpha1.PodFailedEvent), string(busv1alpha1.PodEvictedEvent),
		string(busv1alpha1.PodPendingEvent), string(busv1alpha1.PodRunningEvent), string(busv1alpha1.JobUnknownEvent),
		string(busv1alpha1.TaskCompletedEvent), string(busv1alpha1.TaskFailedEvent)}
	Actions = []string{string(busv1alpha1.AbortJobAction), string(busv1alpha1.RestartJobAction), string(busv1alpha1.RestartTaskAction),
		string(busv1alpha1.RestartPodAction), string(busv1alpha1.TerminateJobAction), string(busv1alpha1.CompleteJobAction)}
	// TolerationOperators and TaintEffects are what a pod's tolerations may say.
	TolerationOperators = []string{string(corev1.TolerationOpExists), string(corev1.TolerationOpEqual)}
	TaintEffects        = []string{string(corev1.TaintEffectNoSchedule), string(corev1.TaintEffectPreferNoSchedule), string(corev1.TaintEffectNoExecute)}
)

// EnvVarNameRule is what an environment variable's name may be (Kubernetes' IsEnvVarName).
const EnvVarNameRule = "letters, digits, '_', '-' and '.', not starting with a digit"

// HourLayout is ElasticCTR's form of an hour of data (START_DATE_HR, END_DATE_HR).
const HourLayout = "20060102/15"

func batchEvent(s string) busv1alpha1.Event   { return busv1alpha1.Event(s) }
func batchAction(s string) busv1alpha1.Action { return busv1alpha1.Action(s) }

// checker collects FieldErrors.
type checker struct{ errs FieldErrors }

func (c *checker) bad(path, format string, args ...any) {
	c.errs = append(c.errs, FieldError{Path: path, Detail: fmt.Sprintf(format, args...)})
}

// Validate checks what the schema cannot: every value that must be parsed, and every value
// that must agree with another. It returns every problem found.
func (j TrainingJob) Validate() FieldErrors {
	var c checker
	c.labelValue("stack", j.Stack)
	c.envNames("env", j.Env)
	collective := j.Mode == ModeCollective
	tasks := []struct {
		name string
		t    *Task
		want bool
	}{{"pserver", j.PServer, !collective}, {"trainer", j.Trainer, !collective}, {"worker", j.Worker, collective}}
	for _, tk := range tasks {
		if tk.t == nil {
			continue
		}
		if !tk.want {
			if collective {
				c.bad(tk.name, "is only used with mode = %q; with mode = %q configure worker", ModePS, ModeCollective)
			} else {
				c.bad(tk.name, "is only used with mode = %q; with mode = %q configure pserver and trainer", ModeCollective, ModePS)
			}
			continue
		}
		c.resources(tk.name, tk.t.Requests, tk.t.Limits)
		if tk.name == "pserver" && tk.t.GPUs != nil && *tk.t.GPUs > 0 {
			c.bad("pserver.gpus", "%d: parameter servers keep and update the tables on CPUs and would leave a GPU idle; give the GPUs to the trainers (trainer.gpus)", *tk.t.GPUs)
		}
	}
	if r := j.recipe(); r != nil {
		r.validate(j, j.Defaulted(), &c)
	}
	if j.Command == nil && j.Entry == "" && j.recipe() == nil {
		c.bad("image", "%q with the default command needs entry: paddle_k8s start_fluid runs `sh -c \"$ENTRY\"`, and an empty ENTRY exits 0, "+
			"so every task completes and the job ends as a success without training. Set entry to the image's training program "+
			"(the default image's is %q), name the image's recipe (recipe), or set command", j.Image, DefaultEntry)
	}
	if total := j.Defaulted().TotalPods(); j.MinAvailable > total {
		c.bad("min_available", "%d is more than the %d pods the job asks for; a gang larger than the job is never scheduled: set at most %d, or leave it out (the whole job)", j.MinAvailable, total, total)
	}
	if ds := j.Dataset; ds != nil {
		c.dataset(ds)
		if ds.Volume != nil {
			// The trainers mount the model output (and the slot config) too.
			at, d := ds.volumeMountPath(), j.Defaulted()
			for _, other := range []string{d.ModelOutput.MountPath, SlotConfigDir} {
				if pathsNest(at, other) {
					c.bad("dataset.volume.mount_path", "%q is, holds or is inside %s, where ctr mounts another volume into the trainers; choose another path", at, other)
				}
			}
		}
	}
	if mo := j.ModelOutput; mo != nil {
		c.quantity("model_output.size", mo.Size, "10Gi")
		c.dnsSubdomain("model_output.storage_class", mo.StorageClass, "StorageClass")
		c.dnsSubdomain("model_output.existing_claim", mo.ExistingClaim, "PersistentVolumeClaim")
		if mo.MountPath != "" && (!strings.HasPrefix(mo.MountPath, "/") || mo.MountPath == "/") {
			c.bad("model_output.mount_path", "%q must be an absolute path other than /", mo.MountPath)
		}
		if strings.Contains(mo.DonefilePath, "..") || strings.HasPrefix(mo.DonefilePath, "/") {
			c.bad("model_output.donefile_path", "%q must be relative to the model output, without ..", mo.DonefilePath)
		}
	}
	if me := j.ModelExport; me != nil {
		d := j.Defaulted()
		if p := me.Path; p != "" && (strings.HasPrefix(p, "/") || slices.Contains(strings.Split(p, "/"), "..")) {
			c.bad("model_export.path", "%q must be relative to the model output's mount path, without ..", p)
		}
		if p := me.ServingModel; p != "" && (strings.HasPrefix(p, "/") || slices.Contains(strings.Split(p, "/"), "..")) {
			c.bad("model_export.serving_model", "%q must be relative to a save folder, without ..", p)
		}
		if strings.Contains(me.Var, "/") {
			c.bad("model_export.var", "%q: a variable's file name, without /", me.Var)
		}
		if me.EmbedxDim < 0 || (me.EmbedxDim > 0 && d.ModelExport.Format != "ps-table") {
			c.bad("model_export.embedx_dim", "is a parameter-server table's accessor setting: only with format = \"ps-table\", and at least 0")
		}
		c.resources("model_export.resources", me.Requests, me.Limits)
		if dp := d.ModelOutput.DonefilePath; dp != modelExportDonefileSuffix && !strings.HasSuffix(dp, "/"+modelExportDonefileSuffix) {
			c.bad("model_output.donefile_path", "%q: the model export writes <folder>/%s (the default %q does); end the path with it", dp, modelExportDonefileSuffix, DefaultDonefilePath)
		}
	}
	if fs := j.FileServer; fs != nil {
		if fs.UploadInsecure && !fs.Upload {
			c.bad("file_server.upload_insecure", "has no effect without upload = true")
		}
		if st := fs.ServiceType; fs.UploadInsecure && st != "" && st != string(corev1.ServiceTypeClusterIP) {
			c.bad("file_server.upload_insecure", "with service_type = %q the file server is reachable from outside the cluster, and insecure uploads "+
				"would let anyone there write the donefile and so roll out any model: keep the upload token (leave upload_insecure unset) or use service_type = %q",
				st, corev1.ServiceTypeClusterIP)
		}
		c.annotations("file_server.service_annotations", fs.ServiceAnnotations)
		c.resources("file_server.resources", fs.Requests, fs.Limits)
		c.securityContext("file_server.security_context", fs.SecurityContext)
		c.legacy("file_server.security_context", fs.SecurityContext != nil, "file_server.pod.security_context", fs.Pod != nil && fs.Pod.SecurityContext != nil)
		c.pod("file_server.pod", fs.Pod)
	}
	c.securityContext("security_context", j.SecurityContext)
	c.legacy("security_context", j.SecurityContext != nil, "pod.security_context", j.Pod != nil && j.Pod.SecurityContext != nil)
	c.legacy("env", j.Env != nil, "pod.env", j.Pod != nil && j.Pod.Env != nil)
	c.pod("pod", j.Pod)
	if len(c.errs) == 0 {
		// Against what ctr renders, once the settings are known to render.
		bare := j
		bare.Pod, bare.Env, bare.SecurityContext = nil, nil, nil
		var fs *PodSettings
		if j.FileServer != nil {
			fs = j.FileServer.Pod
			f := *j.FileServer
			f.Pod, f.SecurityContext = nil, nil
			bare.FileServer = &f
		}
		c.checkPodCollisions(bare.Defaulted().objects(), map[string]podTarget{
			componentTraining: {"pod", j.Pod}, componentFileServer: {"file_server.pod", fs}})
	}
	return c.errs
}

func (c *checker) dataset(ds *Dataset) {
	if ds.HDFSAddress != "" {
		if u, err := url.Parse(ds.HDFSAddress); err != nil || u.Scheme != "hdfs" || u.Host == "" {
			c.bad("dataset.hdfs_address", "%q is not an HDFS address; use hdfs://HOST:PORT", ds.HDFSAddress)
		}
	}
	if ds.Path != "" && !strings.HasPrefix(ds.Path, "/") {
		c.bad("dataset.path", "%q must be an absolute path in the dataset's source (starting with /)", ds.Path)
	}
	var sources []string
	if ds.HDFSAddress != "" || ds.HDFSUGI != "" {
		sources = append(sources, "hdfs_address/hdfs_ugi")
	}
	if s3 := ds.S3; s3 != nil {
		sources = append(sources, "s3")
		if s3.Endpoint != "" {
			if u, err := url.Parse(s3.Endpoint); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || (u.Path != "" && u.Path != "/") {
				c.bad("dataset.s3.endpoint", "%q is not an endpoint; use https://HOST[:PORT], e.g. https://s3.bj.bcebos.com for BOS in Beijing", s3.Endpoint)
			}
		}
		c.dnsSubdomain("dataset.s3.credentials_secret", s3.CredentialsSecret, "Secret")
	}
	if v := ds.Volume; v != nil {
		sources = append(sources, "volume")
		c.dnsSubdomain("dataset.volume.claim_name", v.ClaimName, "PersistentVolumeClaim")
		if v.MountPath != "" && (!strings.HasPrefix(v.MountPath, "/") || path.Clean(v.MountPath) != v.MountPath || v.MountPath == "/") {
			c.bad("dataset.volume.mount_path", "%q must be a clean absolute path other than /, e.g. %s", v.MountPath, DefaultDatasetMountPath)
		}
	}
	if len(sources) > 1 {
		c.bad("dataset", "names %s: a dataset has one source; set only one of them", strings.Join(sources, " and "))
	}
	hour := func(path, v string) (time.Time, bool) {
		if v == "" {
			return time.Time{}, false
		}
		t, err := time.Parse(HourLayout, v)
		if err != nil {
			c.bad(path, "%q is not an hour that exists in ElasticCTR's form YYYYMMDD/HH (hours 00-23), e.g. 20200401/00", v)
			return t, false
		}
		return t, true
	}
	start, okStart := hour("dataset.start_hour", ds.StartHour)
	end, okEnd := hour("dataset.end_hour", ds.EndHour)
	if okStart && okEnd && end.Before(start) {
		c.bad("dataset.end_hour", "%q is before start_hour %q; the window must end at or after its start", ds.EndHour, ds.StartHour)
	}
}

// resources checks the requests and limits of a container at path (e.g. "trainer").
func (c *checker) resources(path string, requests, limits map[string]string) {
	for _, rl := range []struct {
		field string
		m     map[string]string
	}{{"requests", requests}, {"limits", limits}} {
		for _, k := range sortedKeys(rl.m) {
			v := rl.m[k]
			p := fmt.Sprintf("%s.%s[%q]", path, rl.field, k)
			if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
				c.bad(p, "%q is not a resource name (e.g. cpu, memory, ephemeral-storage, nvidia.com/gpu)", k)
			}
			if q, err := resource.ParseQuantity(v); err != nil {
				c.bad(p, "%q is not a quantity, e.g. 500m or 2 for cpu, 4Gi for memory", v)
			} else if q.Sign() < 0 {
				c.bad(p, "%q is negative; use 0 or more", v)
			}
		}
	}
	for _, k := range sortedKeys(requests) {
		lim, ok := limits[k]
		if !ok {
			continue
		}
		rq, err1 := resource.ParseQuantity(requests[k])
		lq, err2 := resource.ParseQuantity(lim)
		if err1 == nil && err2 == nil && rq.Cmp(lq) > 0 {
			c.bad(fmt.Sprintf("%s.requests[%q]", path, k), "request %s is more than the limit %s; a request must be at most its limit", requests[k], lim)
		}
	}
}

// quantity checks a positive storage quantity; "" is unset.
func (c *checker) quantity(path, v, example string) {
	if v == "" {
		return
	}
	if q, err := resource.ParseQuantity(v); err != nil || q.Sign() <= 0 {
		c.bad(path, "%q is not a positive storage quantity, e.g. %s", v, example)
	}
}

func (c *checker) dnsSubdomain(path, v, kind string) {
	if v == "" {
		return
	}
	if msgs := validation.IsDNS1123Subdomain(v); len(msgs) > 0 {
		c.bad(path, "%q is not a valid %s name: %s", v, kind, strings.Join(msgs, "; "))
	}
}

func (c *checker) labelValue(path, v string) {
	if v == "" {
		return
	}
	if msgs := validation.IsValidLabelValue(v); len(msgs) > 0 {
		c.bad(path, "%q is not a valid label value: %s", v, strings.Join(msgs, "; "))
	}
}

// labels checks a map of label keys to values (a node selector, a peer's labels).
func (c *checker) labels(path string, m map[string]string) {
	for _, k := range sortedKeys(m) {
		at := fmt.Sprintf("%s[%q]", path, k)
		c.labelKey(at, k)
		if msgs := validation.IsValidLabelValue(m[k]); len(msgs) > 0 {
			c.bad(at, "%q is not a label value: %s", m[k], strings.Join(msgs, "; "))
		}
	}
}

// labelKey checks a label key (a map's key, or a topology key naming a node label).
func (c *checker) labelKey(path, k string) {
	if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
		c.bad(path, "%q is not a label key (an optional DNS prefix and '/', then at most 63 letters, digits, '-', '_' or '.', "+
			"starting and ending with a letter or digit): %s", k, strings.Join(msgs, "; "))
	}
}

func (c *checker) envNames(path string, env map[string]string) {
	for _, k := range sortedKeys(env) {
		if msgs := validation.IsEnvVarName(k); len(msgs) > 0 {
			c.bad(fmt.Sprintf("%s[%q]", path, k), "%q is not a valid environment variable name: use %s", k, EnvVarNameRule)
		}
	}
}

// tolerations checks what the schema's lists of operators and effects cannot: the key, and
// the value that goes with the operator.
func (c *checker) tolerations(path string, ts []Toleration) {
	for i, t := range ts {
		at := fmt.Sprintf("%s[%d]", path, i)
		if t.Key != "" {
			if msgs := validation.IsQualifiedName(t.Key); len(msgs) > 0 {
				c.bad(at+".key", "%q is not a taint key: %s", t.Key, strings.Join(msgs, "; "))
			}
		}
		switch {
		case t.Operator == string(corev1.TolerationOpExists) && t.Value != "":
			c.bad(at+".value", "must be empty with operator = %q (it matches every value)", corev1.TolerationOpExists)
		case t.Key == "" && (t.Operator == "" || t.Operator == string(corev1.TolerationOpEqual)):
			c.bad(at+".operator", "must be %q when key is empty (a toleration of every taint)", corev1.TolerationOpExists)
		}
	}
}

// pathsNest says whether one of two clean absolute paths is the other or inside it.
func pathsNest(a, b string) bool {
	inside := func(x, y string) bool { return x == y || strings.HasPrefix(x, strings.TrimSuffix(y, "/")+"/") }
	return inside(a, b) || inside(b, a)
}
