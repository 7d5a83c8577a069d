package stack

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	busv1alpha1 "volcano.sh/apis/pkg/apis/bus/v1alpha1"
)

// FieldError is a configuration error at an attribute path such as "trainer.replicas"
// (dots between attribute names, [i] for list elements, ["key"] for map entries).
type FieldError struct {
	Path   string
	Detail string
}

func (e FieldError) Error() string { return e.Path + ": " + e.Detail }

// FieldErrors is every error found; rendering refuses a job that has any.
type FieldErrors []FieldError

func (es FieldErrors) Error() string {
	msgs := make([]string, len(es))
	for i, e := range es {
		msgs[i] = e.Error()
	}
	return strings.Join(msgs, "; ")
}

// Allowed values, exported for the schema's validators and docs.
var (
	Modes        = []string{ModePS, ModeCollective}
	AccessModes  = []string{AccessReadWriteOnce, AccessReadWriteMany}
	ServiceTypes = []string{"ClusterIP", "NodePort", "LoadBalancer"}
	PullPolicies = []string{"Always", "IfNotPresent", "Never"}
	Events       = []string{string(busv1alpha1.AnyEvent), string(busv1alpha1.PodFailedEvent), string(busv1alpha1.PodEvictedEvent),
		string(busv1alpha1.PodPendingEvent), string(busv1alpha1.PodRunningEvent), string(busv1alpha1.JobUnknownEvent),
		string(busv1alpha1.TaskCompletedEvent), string(busv1alpha1.TaskFailedEvent)}
	Actions = []string{string(busv1alpha1.AbortJobAction), string(busv1alpha1.RestartJobAction), string(busv1alpha1.RestartTaskAction),
		string(busv1alpha1.RestartPodAction), string(busv1alpha1.TerminateJobAction), string(busv1alpha1.CompleteJobAction)}
)

// MaxNameLength keeps derived names (pods "<job>-trainer-12", owner label values) within
// Kubernetes' 63-character limits.
const MaxNameLength = 40

var hourRE = regexp.MustCompile(`^\d{8}/\d{2}$`)

func batchEvent(s string) busv1alpha1.Event   { return busv1alpha1.Event(s) }
func batchAction(s string) busv1alpha1.Action { return busv1alpha1.Action(s) }

// Validate checks the job as given (before defaults) and returns every problem found.
func (j TrainingJob) Validate() FieldErrors {
	var errs FieldErrors
	bad := func(path, format string, args ...any) {
		errs = append(errs, FieldError{Path: path, Detail: fmt.Sprintf(format, args...)})
	}
	oneOf := func(path, v string, allowed []string) {
		if v == "" {
			return
		}
		for _, a := range allowed {
			if v == a {
				return
			}
		}
		bad(path, "%q is not allowed; use one of %s", v, strings.Join(quoteAll(allowed), ", "))
	}
	validateName(bad, "name", j.Name, MaxNameLength)
	validateName(bad, "namespace", j.Namespace, 63)
	if j.Stack != "" {
		if msgs := validation.IsValidLabelValue(j.Stack); len(msgs) > 0 {
			bad("stack", "%q is not a valid label value: %s", j.Stack, strings.Join(msgs, "; "))
		}
	}
	oneOf("mode", j.Mode, Modes)
	oneOf("image_pull_policy", j.ImagePullPolicy, PullPolicies)
	if j.Port != 0 && (j.Port < 1 || j.Port > 65535) {
		bad("port", "%d is not a TCP port; use 1-65535", j.Port)
	}
	if j.MaxRetry < 0 {
		bad("max_retry", "%d is negative; use 0 for the default (%d) or a positive count", j.MaxRetry, DefaultMaxRetry)
	}
	for i, c := range j.Command {
		if c == "" {
			bad(fmt.Sprintf("command[%d]", i), "must not be empty")
		}
	}
	for k := range j.Env {
		if msgs := validation.IsEnvVarName(k); len(msgs) > 0 {
			bad(fmt.Sprintf("env[%q]", k), "%q is not a valid environment variable name", k)
		}
	}
	validatePolicies(bad, "policies", j.Policies)

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
				bad(tk.name, "is only used with mode = %q; with mode = %q configure worker", ModePS, ModeCollective)
			} else {
				bad(tk.name, "is only used with mode = %q; with mode = %q configure pserver and trainer", ModeCollective, ModePS)
			}
			continue
		}
		validateTask(bad, tk.name, tk.t)
	}

	if j.MinAvailable < 0 {
		bad("min_available", "%d is negative; leave it unset to gang-schedule every pod", j.MinAvailable)
	} else if total := j.Defaulted().TotalPods(); j.MinAvailable > total {
		bad("min_available", "%d is more than the %d pods the job asks for; a gang larger than the job is never scheduled", j.MinAvailable, total)
	}

	if ds := j.Dataset; ds != nil {
		if ds.HDFSAddress != "" {
			if u, err := url.Parse(ds.HDFSAddress); err != nil || u.Scheme != "hdfs" || u.Host == "" {
				bad("dataset.hdfs_address", "%q is not an HDFS address; use hdfs://HOST:PORT", ds.HDFSAddress)
			}
		}
		if ds.Path != "" && !strings.HasPrefix(ds.Path, "/") {
			bad("dataset.path", "%q must be an absolute path on HDFS (starting with /)", ds.Path)
		}
		for _, h := range []struct{ path, v string }{{"dataset.start_hour", ds.StartHour}, {"dataset.end_hour", ds.EndHour}} {
			if h.v != "" && !hourRE.MatchString(h.v) {
				bad(h.path, "%q is not an hour in ElasticCTR's form YYYYMMDD/HH, e.g. 20200401/00", h.v)
			}
		}
		if ds.StartHour != "" && ds.EndHour != "" && hourRE.MatchString(ds.StartHour) && hourRE.MatchString(ds.EndHour) && ds.EndHour < ds.StartHour {
			bad("dataset.end_hour", "%q is before start_hour %q", ds.EndHour, ds.StartHour)
		}
		if ds.SparseDim < 0 {
			bad("dataset.sparse_dim", "%d is negative; use the number of sparse feature ids, e.g. 1000001", ds.SparseDim)
		}
	}

	if mo := j.ModelOutput; mo != nil {
		if mo.Size != "" {
			if q, err := resource.ParseQuantity(mo.Size); err != nil || q.Sign() <= 0 {
				bad("model_output.size", "%q is not a positive storage quantity, e.g. 10Gi", mo.Size)
			}
		}
		oneOf("model_output.access_mode", mo.AccessMode, AccessModes)
		if mo.StorageClass != "" {
			if msgs := validation.IsDNS1123Subdomain(mo.StorageClass); len(msgs) > 0 {
				bad("model_output.storage_class", "%q is not a valid StorageClass name", mo.StorageClass)
			}
		}
		if mo.ExistingClaim != "" {
			if msgs := validation.IsDNS1123Subdomain(mo.ExistingClaim); len(msgs) > 0 {
				bad("model_output.existing_claim", "%q is not a valid PersistentVolumeClaim name", mo.ExistingClaim)
			}
		}
		if mo.MountPath != "" && (!strings.HasPrefix(mo.MountPath, "/") || mo.MountPath == "/") {
			bad("model_output.mount_path", "%q must be an absolute path other than /", mo.MountPath)
		}
		if strings.Contains(mo.DonefilePath, "..") || strings.HasPrefix(mo.DonefilePath, "/") {
			bad("model_output.donefile_path", "%q must be relative to the model output, without ..", mo.DonefilePath)
		}
	}
	if fs := j.FileServer; fs != nil {
		if fs.Port != 0 && (fs.Port < 1 || fs.Port > 65535) {
			bad("file_server.port", "%d is not a TCP port; use 1-65535", fs.Port)
		}
		oneOf("file_server.service_type", fs.ServiceType, ServiceTypes)
		if fs.Replicas < 0 {
			bad("file_server.replicas", "%d is negative", fs.Replicas)
		}
		if fs.UploadInsecure && !fs.Upload {
			bad("file_server.upload_insecure", "has no effect without upload = true")
		}
		validateSecurityContext(bad, "file_server.security_context", fs.SecurityContext)
	}
	validateSecurityContext(bad, "security_context", j.SecurityContext)
	return errs
}

// validateName checks a DNS-1123 label of at most max characters.
func validateName(bad func(string, string, ...any), path, v string, max int) {
	if msgs := validation.IsDNS1123Label(v); len(msgs) > 0 {
		bad(path, "%q is not a valid name: use at most %d lowercase letters, digits and '-', starting and ending with a letter or digit", v, max)
	} else if len(v) > max {
		bad(path, "%q is %d characters long; at most %d are allowed so that derived pod names fit in 63", v, len(v), max)
	}
}

func validateTask(bad func(string, string, ...any), name string, t *Task) {
	if t.Replicas < 0 {
		bad(name+".replicas", "%d is negative; use at least 1", t.Replicas)
	}
	for _, rl := range []struct {
		field string
		m     map[string]string
	}{{"requests", t.Requests}, {"limits", t.Limits}} {
		for k, v := range rl.m {
			p := fmt.Sprintf("%s.%s[%q]", name, rl.field, k)
			if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
				bad(p, "%q is not a resource name (e.g. cpu, memory, ephemeral-storage, nvidia.com/gpu)", k)
			}
			if q, err := resource.ParseQuantity(v); err != nil {
				bad(p, "%q is not a quantity, e.g. 500m or 2 for cpu, 4Gi for memory", v)
			} else if q.Sign() < 0 {
				bad(p, "%q is negative", v)
			}
		}
	}
	for k, req := range t.Requests {
		lim, ok := t.Limits[k]
		if !ok {
			continue
		}
		rq, err1 := resource.ParseQuantity(req)
		lq, err2 := resource.ParseQuantity(lim)
		if err1 == nil && err2 == nil && rq.Cmp(lq) > 0 {
			bad(fmt.Sprintf("%s.requests[%q]", name, k), "request %s is more than the limit %s", req, lim)
		}
	}
	if t.GPUs < 0 {
		bad(name+".gpus", "%d is negative", t.GPUs)
	}
	validatePolicies(bad, name+".policies", t.Policies)
}

func validatePolicies(bad func(string, string, ...any), path string, ps []Policy) {
	for i, p := range ps {
		if !contains(Events, p.Event) {
			bad(fmt.Sprintf("%s[%d].event", path, i), "%q is not a Volcano event; use one of %s", p.Event, strings.Join(quoteAll(Events), ", "))
		}
		if !contains(Actions, p.Action) {
			bad(fmt.Sprintf("%s[%d].action", path, i), "%q is not a Volcano action; use one of %s", p.Action, strings.Join(quoteAll(Actions), ", "))
		}
	}
}

func contains(list []string, v string) bool {
	for _, a := range list {
		if a == v {
			return true
		}
	}
	return false
}

func quoteAll(vs []string) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = fmt.Sprintf("%q", v)
	}
	return out
}

func validationEnvName(k string) bool { return len(validation.IsEnvVarName(k)) > 0 }
