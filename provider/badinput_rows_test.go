package provider

import (
	"maps"
	"slices"
	"strings"

	rschema "github.com/hashicorp/terraform-plugin-framework/resource/schema"
)

// The rows of badInputs that several types share: each family is written once and added to
// the table of every type that has the attributes.

// commonBadInputs are the bad values of what every resource of typ may have: its name and
// namespace, stack, image pull Secrets, timeouts and own connection, as far as it has them.
func commonBadInputs(typ string, base map[string]any) []badInput {
	attrs := resourceSchemas()[typ].Attributes
	var rows []badInput
	has := func(name string) bool { _, ok := attrs[name]; return ok }
	if has("namespace") {
		rows = append(rows,
			badInput{"namespace with capitals", with(base, "namespace", "Ads"), "namespace",
				`Attribute namespace must be at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit, got: Ads`},
			badInput{"namespace too long", with(base, "namespace", strings.Repeat("a", 64)), "namespace", `at most 63`})
	}
	if has("stack") {
		rows = append(rows, badInput{"stack not a label value", with(base, "stack", "-x-"), "stack", `"-x-" is not a valid label value`})
	}
	if has("image_pull_secrets") {
		rows = append(rows, badInput{"pull secret name", with(base, "image_pull_secrets", []any{"Mirror_Pull"}), "image_pull_secrets[0]", `must be a Secret's name`})
	}
	if to, ok := attrs["timeouts"].(rschema.SingleNestedAttribute); ok {
		for _, op := range slices.Sorted(maps.Keys(to.Attributes)) {
			rows = append(rows, badInput{"timeout " + op, with(base, "timeouts", map[string]any{op: "soon"}), "timeouts." + op,
				`Attribute timeouts.` + op + `: "soon" is not a positive duration; use a number with a unit`},
				badInput{"negative timeout " + op, with(base, "timeouts", map[string]any{op: "-5m"}), "timeouts." + op, `"-5m" is not a positive duration`})
		}
	}
	return append(rows, connectionBadInputs(base, true)...)
}

// securityContextBadInputs are the bad values of a security_context at `at`.
func securityContextBadInputs(base map[string]any, at string) []badInput {
	sc := func(kv ...any) map[string]any { return setAttr(base, at, with(map[string]any{}, kv...)) }
	return []badInput{
		{"negative user", sc("run_as_user", -1), at + ".run_as_user", `value must be between 0 and 2147483647, got: -1`},
		{"negative group", sc("run_as_group", -1), at + ".run_as_group", `value must be between 0 and`},
		{"negative fs group", sc("fs_group", -1), at + ".fs_group", `value must be between 0 and`},
		{"seccomp profile", sc("seccomp_profile", "Localhost"), at + ".seccomp_profile", `value must be one of`},
		{"no capabilities", sc("add_capabilities", []any{}), at + ".add_capabilities", `list must contain at least 1 elements`},
		{"capability", sc("add_capabilities", []any{"cap_chown"}), at + ".add_capabilities[0]", `"cap_chown" is not a capability name as Kubernetes spells it, e.g. NET_BIND_SERVICE`},
		{"root and non-root", sc("run_as_user", 0, "run_as_non_root", true), at + ".run_as_non_root", `contradicts run_as_user = 0`},
	}
}

// podBadInputs are the bad values of a pod block at `at` ("pod", "file_server.pod") on their
// own; what collides with a type's own pods is in its table.
func podBadInputs(base map[string]any, at string) []badInput {
	pod := func(kv ...any) map[string]any { return setAttr(base, at, with(map[string]any{}, kv...)) }
	vol := map[string]any{"name": "extra", "empty_dir": map[string]any{}}
	mount := func(kv ...any) map[string]any {
		return pod("volumes", []any{vol}, "volume_mounts", []any{with(map[string]any{"name": "extra", "mount_path": "/extra"}, kv...)})
	}
	term := func(kind string, exprs ...any) map[string]any {
		t := map[string]any{"match_expressions": exprs}
		if kind == "preferred" {
			t["weight"] = 10
		}
		return pod("affinity", map[string]any{"node": map[string]any{kind: []any{t}}})
	}
	expr := func(kv ...any) map[string]any {
		return with(map[string]any{"key": "zone", "operator": "In", "values": []any{"a"}}, kv...)
	}
	rows := []badInput{
		{"toleration operator", pod("tolerations", []any{map[string]any{"key": "k", "operator": "Bogus"}}), at + ".tolerations[0].operator", `value must be one of: \["Exists" "Equal"\]`},
		{"toleration effect", pod("tolerations", []any{map[string]any{"key": "k", "effect": "NoRun"}}), at + ".tolerations[0].effect", `value must be one of`},
		{"toleration key", pod("tolerations", []any{map[string]any{"key": "a b", "operator": "Exists"}}), at + ".tolerations[0].key", `"a b" is not a taint key`},
		{"toleration value with Exists", pod("tolerations", []any{map[string]any{"key": "k", "operator": "Exists", "value": "v"}}), at + ".tolerations[0].value",
			`must be empty with operator = "Exists"`},
		{"toleration of every taint without Exists", pod("tolerations", []any{map[string]any{"effect": "NoSchedule"}}), at + ".tolerations[0].operator", `must be "Exists" when key is empty`},
		{"node selector key", pod("node_selector", map[string]any{"-pool": "x"}), at + `.node_selector["-pool"]`, `"-pool" is not a label key`},
		{"required term without requirements", term("required"), at + ".affinity.node.required[0].match_expressions", `list must contain at least 1 elements`},
		{"preferred term without requirements", term("preferred"), at + ".affinity.node.preferred[0].match_expressions", `list must contain at least 1 elements`},
		{"node operator", term("required", expr("operator", "Near")), at + ".affinity.node.required[0].match_expressions[0].operator", `value must be one of`},
		{"preferred node operator", term("preferred", expr("operator", "Near")), at + ".affinity.node.preferred[0].match_expressions[0].operator", `value must be one of`},
		{"weight", pod("affinity", map[string]any{"node": map[string]any{"preferred": []any{map[string]any{"weight": 0, "match_expressions": []any{expr()}}}}}),
			at + ".affinity.node.preferred[0].weight", `value must be between 1 and 100`},
		{"node label key", term("required", expr("key", "a b")), at + ".affinity.node.required[0].match_expressions[0].key", `"a b" is not a node label key`},
		{"In without values", term("required", expr("values", nil)), at + ".affinity.node.required[0].match_expressions[0].values", `needs at least one value with operator = "In"`},
		{"Exists with values", term("required", expr("operator", "Exists")), at + ".affinity.node.required[0].match_expressions[0].values", `must be empty with operator = "Exists"`},
		{"Gt with two values", term("required", expr("operator", "Gt", "values", []any{"1", "2"})), at + ".affinity.node.required[0].match_expressions[0].values",
			`needs exactly one integer with operator = "Gt"`},
		{"service account name", pod("service_account_name", "Bad_SA"), at + ".service_account_name", `"Bad_SA" is not a valid ServiceAccount name`},
		{"service account annotation key", pod("service_account_annotations", map[string]any{"bad key": "x"}), at + `.service_account_annotations["bad key"]`, `is not an annotation key`},
		{"label value", pod("labels", map[string]any{"team": "-x-"}), at + `.labels["team"]`, `"-x-" is not a label value`},
		{"reserved label", pod("labels", map[string]any{"ctr.elasticctr.io/x": "y"}), at + `.labels["ctr.elasticctr.io/x"]`, `which ctr and Volcano keep for their own labels; choose another key`},
		{"annotation key", pod("annotations", map[string]any{"bad key": "x"}), at + `.annotations["bad key"]`, `"bad key" is not an annotation key`},
		{"reserved annotation", pod("annotations", map[string]any{"ctr.elasticctr.io/x": "y"}), at + `.annotations["ctr.elasticctr.io/x"]`, `which ctr and Volcano keep for their own annotations`},
		{"priority class", pod("priority_class_name", "Bad_PC"), at + ".priority_class_name", `"Bad_PC" is not a valid PriorityClass name`},
		{"variable name", pod("env", map[string]any{"1X": "y"}), at + `.env["1X"]`, `"1X" is not a valid environment variable name`},
		{"secret variable name", pod("secret_env", map[string]any{"1X": map[string]any{"secret": "s", "key": "k"}}), at + `.secret_env["1X"]`, `"1X" is not a valid environment variable name`},
		{"secret variable also in env", pod("env", map[string]any{"A": "1"}, "secret_env", map[string]any{"A": map[string]any{"secret": "s", "key": "k"}}),
			at + `.secret_env["A"]`, `"A" is also in env; set a variable in one of them`},
		{"secret of a variable", pod("secret_env", map[string]any{"A": map[string]any{"secret": "Bad_S", "key": "k"}}), at + `.secret_env["A"].secret`, `"Bad_S" is not a valid Secret name`},
		{"key of a variable", pod("secret_env", map[string]any{"A": map[string]any{"secret": "s", "key": "a b"}}), at + `.secret_env["A"].key`, `"a b" is not a Secret key`},
		{"env_from of nothing", pod("env_from", []any{map[string]any{}}), at + ".env_from[0]", `needs exactly one of secret and config_map`},
		{"env_from of both", pod("env_from", []any{map[string]any{"secret": "s", "config_map": "c"}}), at + ".env_from[0]", `needs exactly one of secret and config_map`},
		{"env_from prefix", pod("env_from", []any{map[string]any{"secret": "s", "prefix": "1X"}}), at + ".env_from[0].prefix", `"1X" is not the start of a valid environment variable name`},
		{"env_from config map", pod("env_from", []any{map[string]any{"config_map": "Bad_C"}}), at + ".env_from[0].config_map", `"Bad_C" is not a valid ConfigMap name`},
		{"volume name", pod("volumes", []any{with(vol, "name", "Bad_V")}), at + ".volumes[0].name", `"Bad_V" is not a volume name \(lowercase letters, digits and '-', at most 63\)`},
		{"two volumes of a name", pod("volumes", []any{vol, vol}), at + ".volumes[1].name", `"extra" names two volumes`},
		{"volume without a source", pod("volumes", []any{map[string]any{"name": "extra"}}), at + ".volumes[0]",
			`needs exactly one of persistent_volume_claim, secret, config_map, csi and empty_dir`},
		{"volume with two sources", pod("volumes", []any{with(vol, "secret", map[string]any{"name": "s"})}), at + ".volumes[0]", `needs exactly one of`},
		{"memory medium", pod("volumes", []any{with(vol, "empty_dir", map[string]any{"medium": "Disk"})}), at + ".volumes[0].empty_dir.medium", `value must be one of`},
		{"size limit", pod("volumes", []any{with(vol, "empty_dir", map[string]any{"size_limit": "lots"})}), at + ".volumes[0].empty_dir.size_limit",
			`"lots" is not a positive storage quantity, e.g. 1Gi`},
		{"claim name", pod("volumes", []any{map[string]any{"name": "extra", "persistent_volume_claim": map[string]any{"claim_name": "Bad_C"}}}),
			at + ".volumes[0].persistent_volume_claim.claim_name", `"Bad_C" is not a valid PersistentVolumeClaim name`},
		{"CSI driver", pod("volumes", []any{map[string]any{"name": "extra", "csi": map[string]any{"driver": "Bad_D"}}}), at + ".volumes[0].csi.driver", `"Bad_D" is not a valid CSI driver name`},
		{"relative mount path", mount("mount_path", "extra"), at + ".volume_mounts[0].mount_path", `"extra" must be an absolute path other than /, without .. or ':'`},
		{"two mounts at a path", pod("volumes", []any{vol}, "volume_mounts", []any{map[string]any{"name": "extra", "mount_path": "/extra"}, map[string]any{"name": "extra", "mount_path": "/extra"}}),
			at + ".volume_mounts[1].mount_path", `"/extra" is the mount path of another mount`},
		{"sub path out of the volume", mount("sub_path", "../x"), at + ".volume_mounts[0].sub_path", `"../x" must be a relative path without ..`},
	}
	return append(rows, securityContextBadInputs(base, at+".security_context")...)
}

// taskBadInputs are the bad values of a training task (pserver, trainer, worker) in base.
func taskBadInputs(base map[string]any, task string) []badInput {
	t := func(kv ...any) map[string]any { return with(base, task, with(map[string]any{}, kv...)) }
	policy := func(event, action string) []any { return []any{map[string]any{"event": event, "action": action}} }
	return []badInput{
		{task + " of no pods", t("replicas", 0), task + ".replicas", `Attribute ` + task + `.replicas value must be at least 1`},
		{task + " with negative GPUs", t("gpus", -1), task + ".gpus", `value must be at least 0`},
		{task + " policy event", t("policies", policy("PodExploded", "RestartJob")), task + ".policies[0].event", `value must be one of`},
		{task + " policy action", t("policies", policy("PodFailed", "Shrug")), task + ".policies[0].action", `value must be one of`},
		{task + " resource name", t("requests", map[string]any{"bad key!": "1"}), task + `.requests["bad key!"]`, `"bad key!" is not a resource name \(e.g. cpu, memory`},
	}
}

// setAttr returns config with v at the attribute path at ("pod", "file_server.pod").
func setAttr(config map[string]any, at string, v any) map[string]any {
	head, rest, nested := strings.Cut(at, ".")
	if !nested {
		return with(config, head, v)
	}
	inner, _ := config[head].(map[string]any)
	return with(config, head, setAttr(with(inner), rest, v))
}

// trainingJobTaskBadInputs are the bad values of the training job's tasks.
func trainingJobTaskBadInputs() []badInput {
	base := validConfigs["ctr_training_job"]
	rows := slices.Concat(taskBadInputs(base, "pserver"), taskBadInputs(base, "trainer"), taskBadInputs(with(base, "mode", "collective"), "worker"))
	return append(rows, badInput{"GPUs of parameter servers", with(base, "pserver", map[string]any{"gpus": 1}), "pserver.gpus",
		`1: parameter servers keep and update the tables on CPUs and would leave a GPU idle; give the GPUs to the trainers`})
}

// recipeBadInputs are the bad values of a training job with a recipe (stack.Recipes).
func recipeBadInputs() []badInput {
	hdfs := map[string]any{"hdfs_address": "hdfs://nn:9000", "hdfs_ugi": "u,p", "path": "/d", "start_hour": "20200401/00", "end_hour": "20200401/01", "sparse_dim": 1000}
	fleet := map[string]any{"name": "j", "recipe": "fleet-ctr", "slot_config": "1\n", "dataset": hdfs, "model_output": map[string]any{"donefile_path": "ctr_cube/donefile/base.txt"}}
	rec := map[string]any{"name": "j", "recipe": "paddlerec", "image": "registry.example/paddlerec:2.3", "entry": "python -u tools/static_ps_trainer.py -m config.yaml"}
	return []badInput{
		{"fleet-ctr without a dataset", with(fleet, "dataset", nil), "recipe", `"fleet-ctr" needs an HDFS dataset`},
		{"fleet-ctr from a bucket", with(fleet, "dataset", map[string]any{"s3": map[string]any{"bucket": "ads"}}), "dataset", `must be on HDFS with recipe = "fleet-ctr"`},
		{"fleet-ctr with half a dataset", with(fleet, "dataset", with(hdfs, "sparse_dim", nil)), "dataset", `needs hdfs_address, hdfs_ugi, sparse_dim, start_hour and end_hour with recipe = "fleet-ctr"`},
		{"fleet-ctr with a model export", with(fleet, "model_export", map[string]any{}), "model_export", `must be left out with recipe = "fleet-ctr"`},
		{"fleet-ctr elsewhere", with(fleet, "model_output", map[string]any{"mount_path": "/models", "donefile_path": "ctr_cube/donefile/base.txt"}), "model_output.mount_path",
			`"/models" with recipe = "fleet-ctr": ElasticCTR's dumper writes .* use "/output"`},
		{"fleet-ctr with another donefile", with(fleet, "model_output", map[string]any{"donefile_path": "x/base.txt"}), "model_output.donefile_path",
			`"x/base.txt" with recipe = "fleet-ctr": ElasticCTR's dumper appends to "ctr_cube/donefile/base.txt"`},
		{"paddlerec without an entry", with(rec, "entry", nil), "recipe", `"paddlerec" needs entry, the command that starts PaddleRec's trainer in your image, e.g.`},
		{"paddlerec exporting lodtensor", with(rec, "model_export", map[string]any{"format": "lodtensor"}), "model_export.format", `use format = "ps-table"`},
		{"paddlerec collective", with(with(rec, "mode", "collective"), "worker", map[string]any{"replicas": 1}), "mode",
			`"collective" with recipe = "paddlerec": PaddleRec's static_ps_trainer.py trains with parameter servers; use mode = "ps"`},
	}
}
