package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-log/tflog"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/elasticctr/terraform-provider-ctr/cube/api"
	"github.com/elasticctr/terraform-provider-ctr/internal/kube"
	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
	"github.com/elasticctr/terraform-provider-ctr/provider/internal/diagnostics"
)

// launcherStates asks each running serving pod's launcher what it does (GET /status on the
// status port, through the API server's pod proxy): pod name → state. Pods that do not
// answer are left out; forbidden is the API server's refusal, if it refused this identity
// (kube.IsForbidden).
func launcherStates(ctx context.Context, kc *kube.Client, dep *unstructured.Unstructured) (states map[string]api.LauncherState, forbidden error) {
	pods, err := kc.Pods(ctx, dep)
	if err != nil {
		tflog.Warn(ctx, err.Error())
		return nil, nil
	}
	out := map[string]api.LauncherState{}
	for _, p := range pods {
		if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
			continue
		}
		b, err := kc.PodProxyGet(ctx, p.Namespace, p.Name, strconv.Itoa(stack.ServingStatusPort), strings.TrimPrefix(api.LauncherStatusPath, "/"))
		if kube.IsForbidden(err) {
			return out, err // so will every other pod's be
		}
		var st api.LauncherState
		if err == nil {
			err = json.Unmarshal(b, &st)
		}
		if err != nil {
			tflog.Debug(ctx, fmt.Sprintf("serving pod %s/%s: launcher status: %s", p.Namespace, p.Name, err))
			continue
		}
		out[p.Name] = st
	}
	return out, nil
}

// readModelID is the donefile id of the dense model every serving pod has in place ("" when
// the serving does not follow the cube, or its pods disagree or have none), and, when the
// cube's transfer answers, a warning if that is not the version the cube serves.
func readModelID(ctx context.Context, kc *kube.Client, s stack.Serving, dep *unstructured.Unstructured, diags *diag.Diagnostics) string {
	if dep == nil || !s.FollowsCube() {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	what := fmt.Sprintf("Serving %s/%s", s.Namespace, s.Name)
	states, forbidden := launcherStates(ctx, kc, dep)
	if forbidden != nil {
		diags.Append(statusNotReadable(what, "model_id", forbidden))
		return ""
	}
	byID := map[string][]string{}
	for pod, st := range states {
		byID[st.ModelID] = append(byID[st.ModelID], pod)
	}
	model := ""
	if len(byID) == 1 {
		for id := range byID {
			model = id
		}
	}
	cube, forbidden := cubeServedID(ctx, kc, s.CubeTransferURL)
	if forbidden != nil {
		diags.Append(diagnostics.Warning(statusNotReadableSummary, fmt.Sprintf("%s: whether its pods' dense models are the version the cube serves is not known: %s", what, forbidden),
			grantStatusReads("the cube's namespace", stack.ServiceProxy)))
	}
	if cube != "" && (len(byID) != 1 || model != cube) {
		var pods []string
		for id, ps := range byID {
			slices.Sort(ps)
			if id == "" {
				id = "none yet"
			}
			pods = append(pods, fmt.Sprintf("%s: %s", id, strings.Join(ps, ", ")))
		}
		slices.Sort(pods)
		diags.Append(diagnostics.Warning("Serving Behind The Cube", fmt.Sprintf("Serving %s/%s: the cube serves donefile id %s, and the serving pods' dense "+
			"models are %s. Until every pod has it in place, predictions combine the new embeddings with an older dense model.",
			s.Namespace, s.Name, cube, strings.Join(pods, "; ")), "Each pod puts a new version in place within seconds of the cube serving it; "+
			"a pod that stays behind says why in its log (the model URL, a version published without a serving model)."))
	}
	return model
}

// cubeServedID is the donefile id the cube at transferURL (ctr_cube's transfer_url, an
// in-cluster http://<service>.<namespace>.svc:<port>) serves, asked through the API server's
// service proxy; "" when it cannot be asked, and forbidden the API server's refusal if it
// refused this identity.
func cubeServedID(ctx context.Context, kc *kube.Client, transferURL string) (id string, forbidden error) {
	u, err := url.Parse(transferURL)
	var parts []string
	if err == nil {
		parts = strings.Split(u.Hostname(), ".")
	}
	if err != nil || len(parts) < 3 || parts[2] != "svc" || u.Port() == "" {
		tflog.Debug(ctx, fmt.Sprintf("cube_transfer_url %q is not an in-cluster Service URL: the cube's version is not compared", transferURL))
		return "", nil
	}
	b, err := kc.ServiceProxyGet(ctx, parts[1], parts[0], u.Port(), stack.TransferStatusPath)
	if kube.IsForbidden(err) {
		return "", err
	}
	if err != nil {
		tflog.Debug(ctx, err.Error())
		return "", nil
	}
	st, err := stack.DecodeTransferStatus(b)
	if err != nil {
		return "", nil
	}
	return st.ServedID(), nil
}
