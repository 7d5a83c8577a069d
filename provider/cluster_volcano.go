package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/elasticctr/terraform-provider-ctr/internal/kube"
	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
	"github.com/elasticctr/terraform-provider-ctr/internal/volcano"
	"github.com/elasticctr/terraform-provider-ctr/provider/internal/diagnostics"
)

// volcanoObjects are the Volcano objects the state says ctr_cluster manages; false when it
// manages none. A state written before volcano_state existed manages what volcano_objects
// lists, all of it installed by ctr_cluster.
func (m *clusterModel) volcanoObjects(ctx context.Context, diags *diag.Diagnostics) (volcano.Objects, bool) {
	var objs volcano.Objects
	state := volcano.State(m.VolcanoState.ValueString())
	if !state.Managed() && !(m.VolcanoState.IsNull() && !m.VolcanoObjects.IsNull()) {
		return objs, false
	}
	if !m.VolcanoObjects.IsNull() && !m.VolcanoObjects.IsUnknown() {
		diags.Append(m.VolcanoObjects.ElementsAs(ctx, &objs.Created, false)...)
	}
	if !m.VolcanoAdopted.IsNull() && !m.VolcanoAdopted.IsUnknown() {
		diags.Append(m.VolcanoAdopted.ElementsAs(ctx, &objs.Adopted, false)...)
	}
	return objs, true
}

// setVolcano records what ctr_cluster found or made of Volcano, with nothing drifted.
func (m *clusterModel) setVolcano(state volcano.State, version string, objs volcano.Objects) {
	m.VolcanoState, m.VolcanoVersion = types.StringValue(string(state)), optionalString(version)
	m.VolcanoObjects, m.VolcanoAdopted, m.VolcanoDrift = keyList(objs.Created), keyList(objs.Adopted), keyList(nil)
}

// clearVolcano is the state of a cluster that Volcano was not looked at on yet.
func (m *clusterModel) clearVolcano() {
	m.VolcanoState, m.VolcanoVersion = types.StringNull(), types.StringNull()
	m.VolcanoObjects, m.VolcanoAdopted, m.VolcanoDrift = types.ListNull(types.StringType), types.ListNull(types.StringType), types.ListNull(types.StringType)
}

// keyList is a known list of strings, empty when there are none.
func keyList(s []string) types.List {
	vals := make([]attr.Value, len(s))
	for i, v := range s {
		vals[i] = types.StringValue(v)
	}
	return types.ListValueMust(types.StringType, vals)
}

func foundState(f volcano.Found) volcano.State {
	if f.Present {
		return volcano.Existing
	}
	return volcano.Absent
}

// planVolcano says in the plan what an update does to Volcano: volcano_state and its objects
// are unknown when the update installs, upgrades, takes over or hands back Volcano, and stay
// as they are otherwise; nothing has drifted after any apply.
func planVolcano(ctx context.Context, plan, state *clusterModel) {
	pm, pv, pu, _ := plan.volcanoSettings()
	sm, sv, su, _ := state.volcanoSettings()
	var ignored diag.Diagnostics
	_, managed := state.volcanoObjects(ctx, &ignored)
	now := volcano.State(state.VolcanoState.ValueString())
	changes := state.VolcanoState.IsNull() ||
		(pm != sm && !(managed && pm != volcano.None && sm != volcano.None)) ||
		(managed && (pv != sv || pu != su)) ||
		(now == volcano.Absent && pm != volcano.None)
	if changes {
		plan.VolcanoState, plan.VolcanoVersion = types.StringUnknown(), types.StringUnknown()
		plan.VolcanoObjects, plan.VolcanoAdopted = types.ListUnknown(types.StringType), types.ListUnknown(types.StringType)
	} else {
		plan.VolcanoState, plan.VolcanoVersion = state.VolcanoState, state.VolcanoVersion
		plan.VolcanoObjects, plan.VolcanoAdopted = state.VolcanoObjects, state.VolcanoAdopted
	}
	plan.VolcanoDrift = keyList(nil)
}

// drifted says whether a refresh found drift in the Volcano objects ctr_cluster manages.
func (m *clusterModel) drifted() bool {
	return !m.VolcanoDrift.IsNull() && !m.VolcanoDrift.IsUnknown() && len(m.VolcanoDrift.Elements()) > 0
}

// fetchManifest reads a release manifest, downloaded once per provider run and URL.
func (r *clusterResource) fetchManifest(ctx context.Context, url string) ([]byte, error) {
	var cache *volcano.ManifestCache
	if r.data != nil {
		cache = r.data.manifests
	}
	return cache.Fetch(ctx, url)
}

// release is the Volcano release m configures, images from the provider's image_registry.
func (r *clusterResource) release(m *clusterModel) volcano.Release {
	_, version, url, _ := m.volcanoSettings()
	return volcano.Release{Version: version, ManifestURL: url, Registry: r.images().Registry}
}

// applyVolcano does what volcano.mode asks on the cluster m connects to: installs the release
// (or upgrades, or repairs, what prev manages), leaves an existing install alone, takes it
// over, or hands everything back. prev is the state before (nil on create).
func (r *clusterResource) applyVolcano(ctx context.Context, m, prev *clusterModel, diags *diag.Diagnostics) {
	mode, _, _, _ := m.volcanoSettings()
	var prevObjs volcano.Objects
	prevManaged := false
	if prev != nil {
		prevObjs, prevManaged = prev.volcanoObjects(ctx, diags)
	}
	c, d := kubeClient(ctx, m.Kubernetes, nil)
	diags.Append(d...)
	if diags.HasError() {
		return
	}
	if mode == volcano.None {
		if prevManaged {
			tflog.Info(ctx, fmt.Sprintf("volcano.mode = none: handing back the %d Volcano objects ctr_cluster managed", len(prevObjs.Created)+len(prevObjs.Adopted)))
			if err := volcano.HandBack(ctx, c, append(append([]string{}, prevObjs.Created...), prevObjs.Adopted...)); err != nil {
				diags.Append(diagnostics.FailedAt(path.Root("volcano").AtName("mode"), "Hand Back Volcano Error", "Could not remove ctr's labels from the Volcano objects", "", err))
				return
			}
		}
		r.leaveVolcano(ctx, c, m, diags)
		return
	}
	var found volcano.Found
	if !prevManaged {
		var err error
		if found, err = volcano.Detect(ctx, c); err != nil {
			diags.Append(diagnostics.Failed("Install Volcano Error", "Could not tell whether the cluster has Volcano", "", err))
			return
		}
		if found.Present && mode == volcano.IfAbsent {
			tflog.Info(ctx, "the cluster has Volcano "+found.Version+" not installed by ctr_cluster: leaving it alone (volcano.mode = \"adopt\" takes it over)")
			m.setVolcano(volcano.Existing, found.Version, volcano.Objects{})
			return
		}
	}
	rel := r.release(m)
	tflog.Info(ctx, "installing Volcano "+rel.Version+" from "+rel.ManifestURL)
	data, err := r.fetchManifest(ctx, rel.ManifestURL)
	if err != nil {
		diags.Append(diagnostics.FailedAt(path.Root("volcano"), "Install Volcano Error", "Could not fetch the Volcano manifest", "", err))
		return
	}
	set, err := volcano.Set(data, rel)
	if err != nil {
		diags.Append(diagnostics.FailedAt(path.Root("volcano"), "Install Volcano Error", "The Volcano manifest "+rel.ManifestURL+" is not usable", "", err))
		return
	}
	objs, err := volcano.Classify(ctx, c, set, prevObjs)
	if err != nil {
		diags.Append(diagnostics.Failed("Install Volcano Error", "Could not read the cluster's Volcano objects", "", err))
		return
	}
	if n := len(objs.Adopted) - len(prevObjs.Adopted); n > 0 {
		tflog.Info(ctx, fmt.Sprintf("taking over %d Volcano objects that were on the cluster before; destroy hands them back", n))
	}
	volcano.MarkAdopted(set, objs)
	state := volcano.Installed
	switch {
	case prevManaged && prev.VolcanoState.ValueString() == string(volcano.Adopted):
		state = volcano.Adopted
	case !prevManaged && found.Present:
		state = volcano.Adopted
	}
	objs, err = volcano.Install(ctx, c, set, objs, prevObjs)
	// What ctr manages now is in state even when the install failed, so destroy finds it.
	m.setVolcano(state, rel.Version, objs)
	if err != nil {
		diags.Append(diagnostics.Failed("Install Volcano Error", "Volcano "+rel.Version+" was not installed", "", err))
		return
	}
	tflog.Info(ctx, fmt.Sprintf("Volcano %s ready (%d objects created, %d taken over)", rel.Version, len(objs.Created), len(objs.Adopted)))
}

// leaveVolcano records the Volcano the cluster has without managing it (volcano.mode = none).
func (r *clusterResource) leaveVolcano(ctx context.Context, c *kube.Client, m *clusterModel, diags *diag.Diagnostics) {
	found, err := volcano.Detect(ctx, c)
	if err != nil {
		diags.Append(diagnostics.Failed("Read Volcano Error", "Could not tell whether the cluster has Volcano", "", err))
		return
	}
	m.setVolcano(foundState(found), found.Version, volcano.Objects{})
	if !found.Present {
		diags.Append(diagnostics.Warning("No Volcano On The Cluster",
			"volcano.mode is \"none\" and the cluster has no Volcano (no jobs.batch.volcano.sh CRD, no volcano-system/volcano-scheduler Deployment)",
			"ctr_training_job needs Volcano: install it yourself, or set volcano.mode to \"if_absent\"."))
	}
}

// refreshVolcano reads what became of Volcano since the last apply: drift of the objects
// ctr_cluster manages (compared with the release manifest, read again), or whether an install
// that is not ctr's is still there. What cannot be read is a warning: the refresh goes on.
func (r *clusterResource) refreshVolcano(ctx context.Context, st *clusterModel, diags *diag.Diagnostics) {
	if st.VolcanoState.IsNull() || st.Kubernetes.IsNull() || st.Kubernetes.IsUnknown() {
		return
	}
	warn := func(what string, err error) {
		diags.Append(diagnostics.Warning("Volcano Not Refreshed", what+": "+err.Error(), "The plan cannot show drift of Volcano's objects."))
	}
	var d diag.Diagnostics
	c, d := kubeClient(ctx, st.Kubernetes, nil)
	if d.HasError() {
		warn("no connection to the cluster", fmt.Errorf("%v", d.Errors()[0].Detail()))
		return
	}
	objs, managed := st.volcanoObjects(ctx, diags)
	if !managed {
		found, err := volcano.Detect(ctx, c)
		if err != nil {
			warn("could not tell whether the cluster has Volcano", err)
			return
		}
		st.VolcanoState, st.VolcanoVersion = types.StringValue(string(foundState(found))), optionalString(found.Version)
		return
	}
	rel := r.release(st)
	data, err := r.fetchManifest(ctx, rel.ManifestURL)
	var set stack.Set
	if err == nil {
		set, err = volcano.Set(data, rel)
	}
	if err != nil {
		warn("could not read the Volcano manifest "+rel.ManifestURL, err)
		return
	}
	volcano.MarkAdopted(set, objs)
	drift, err := volcano.Drift(ctx, c, set, objs)
	if err != nil {
		warn("could not read Volcano's objects", err)
		return
	}
	for _, line := range drift {
		tflog.Warn(ctx, "Volcano drift: "+line)
	}
	st.VolcanoDrift = keyList(drift)
}

// importVolcano reads back what the cluster has of Volcano. An install by ctr_cluster says its
// release in the annotations of Volcano's Job CRD, and which of its objects it took over in
// theirs; the volcano block stays null when it would only repeat the defaults. An install
// that is not ctr's is existing; none is absent (the next plan installs one, unless mode is
// none).
func (r *clusterResource) importVolcano(ctx context.Context, st *clusterModel, diags *diag.Diagnostics) {
	registry := r.images().Registry
	c, d := kubeClient(ctx, st.Kubernetes, nil)
	diags.Append(d...)
	if d.HasError() {
		return
	}
	found, err := volcano.Detect(ctx, c)
	if err != nil {
		tflog.Warn(ctx, "import: could not look for Volcano: "+err.Error())
		return
	}
	st.Volcano = nil
	if !found.Ours {
		st.setVolcano(foundState(found), found.Version, volcano.Objects{})
		return
	}
	if found.Version == "" || found.URL == "" {
		tflog.Info(ctx, "import: the installed Volcano does not say its release; the plan installs it again")
		return
	}
	data, err := r.fetchManifest(ctx, found.URL)
	var set stack.Set
	if err == nil {
		set, err = volcano.Set(data, volcano.Release{Version: found.Version, ManifestURL: found.URL, Registry: registry})
	}
	if err != nil {
		diags.Append(diagnostics.Warning("Volcano Not Imported",
			fmt.Sprintf("Volcano %s is installed from %s, but its manifest could not be read (%s), so its objects are unknown", found.Version, found.URL, err),
			"The next plan installs it again."))
		return
	}
	var objs volcano.Objects
	for _, o := range set {
		live, err := c.Get(ctx, o.Object)
		if err != nil && !kube.IsNotServed(err) {
			diags.Append(diagnostics.Failed("Import Cluster Error", "Could not read Volcano's objects", "", err))
			return
		}
		if live != nil && (live.GetAnnotations()[volcano.AdoptedAnnotation] == "true" || live.GetLabels()[stack.OwnerLabel] != volcano.Owner) {
			objs.Adopted = append(objs.Adopted, o.Key)
		} else {
			objs.Created = append(objs.Created, o.Key)
		}
	}
	state := volcano.Installed
	if found.Adopted {
		state = volcano.Adopted
	}
	st.setVolcano(state, found.Version, objs)
	if found.Adopted || found.Version != DefaultVolcanoVersion || found.URL != volcanoManifestURL(found.Version) {
		mode := volcano.IfAbsent
		if found.Adopted {
			mode = volcano.Adopt
		}
		st.Volcano = &volcanoModel{Mode: types.StringValue(string(mode)), Version: types.StringValue(found.Version), ManifestURL: types.StringNull(), KeepOnDestroy: types.BoolValue(false)}
		if found.URL != volcanoManifestURL(found.Version) {
			st.Volcano.ManifestURL = types.StringValue(found.URL)
		}
	}
}

// uninstallVolcano deletes the Volcano objects ctr_cluster created and hands back those it
// took over; an install it does not manage stays as it is.
func (r *clusterResource) uninstallVolcano(ctx context.Context, st *clusterModel, diags *diag.Diagnostics) {
	objs, managed := st.volcanoObjects(ctx, diags)
	if !managed {
		tflog.Info(ctx, "Volcano is not ctr_cluster's ("+st.VolcanoState.ValueString()+"): left as it is")
		return
	}
	c, d := kubeClient(ctx, st.Kubernetes, nil)
	diags.Append(d...)
	if diags.HasError() {
		return
	}
	tflog.Info(ctx, fmt.Sprintf("uninstalling Volcano: deleting the %d objects ctr_cluster created, handing back %d", len(objs.Created), len(objs.Adopted)))
	if err := volcano.Uninstall(ctx, c, objs); err != nil {
		diags.Append(diagnostics.Failed("Uninstall Volcano Error", "Could not uninstall Volcano", "", err))
	}
}

// ValidateConfig refuses Volcano settings that volcano.mode = "none" would silently ignore.
func (r *clusterResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var obj types.Object
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("volcano"), &obj)...)
	if resp.Diagnostics.HasError() || obj.IsNull() || obj.IsUnknown() {
		return
	}
	attrs := obj.Attributes()
	if mode, ok := attrs["mode"].(types.String); !ok || mode.ValueString() != string(volcano.None) {
		return
	}
	for _, name := range []string{"version", "manifest_url", "keep_on_destroy"} {
		if v := attrs[name]; !v.IsNull() && !v.IsUnknown() { // judged once known
			resp.Diagnostics.Append(diagnostics.InvalidSetting("Volcano", path.Root("volcano").AtName(name),
				`has no effect with volcano.mode = "none" (ctr_cluster installs and removes nothing of Volcano): remove it, or choose another mode`))
		}
	}
}
