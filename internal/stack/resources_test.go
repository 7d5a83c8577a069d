package stack

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestDefaultedResources: the transfer and the file server always have requests (cpu,
// memory) and a memory limit, from their defaults; a key given replaces the default's and
// the others stay. Before, neither had any: BestEffort, refused by a ResourceQuota that
// requires them.
func TestDefaultedResources(t *testing.T) {
	for _, tc := range []struct {
		name      string
		key       string
		defReq    map[string]string
		defLim    map[string]string
		renderSet func(req, lim map[string]string) (Set, error)
	}{
		{name: "transfer", key: "apps/v1/Deployment/" + cubeTransferName("cube"), defReq: DefaultTransferRequests, defLim: DefaultTransferLimits,
			renderSet: func(req, lim map[string]string) (Set, error) {
				return RenderCube(Cube{Name: "cube", Namespace: "ads", DonefileURL: testDonefile, TransferRequests: req, TransferLimits: lim})
			}},
		{name: "file server", key: "apps/v1/Deployment/" + fileServerName("t"), defReq: DefaultFileServerRequests, defLim: DefaultFileServerLimits,
			renderSet: func(req, lim map[string]string) (Set, error) {
				return RenderTrainingJob(TrainingJob{Name: "t", Namespace: "ads", ProviderVersion: "v1.2.3",
					FileServer: &FileServer{Requests: req, Limits: lim}})
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			container := func(req, lim map[string]string) (rq, lm map[string]string) {
				set, err := tc.renderSet(req, lim)
				require.NoError(t, err)
				dep := typed[appsv1.Deployment](t, set.Find(tc.key))
				r := dep.Spec.Template.Spec.Containers[0].Resources
				rq, lm = map[string]string{}, map[string]string{}
				for k, q := range r.Requests {
					rq[string(k)] = q.String()
				}
				for k, q := range r.Limits {
					lm[string(k)] = q.String()
				}
				return rq, lm
			}
			rq, lm := container(nil, nil)
			assert.Equal(t, tc.defReq, rq)
			assert.Equal(t, tc.defLim, lm)
			require.Contains(t, rq, "cpu")
			require.Contains(t, rq, "memory")
			require.Contains(t, lm, "memory")

			rq, lm = container(map[string]string{"memory": "300Mi"}, map[string]string{"memory": "2Gi", "cpu": "4"})
			assert.Equal(t, "300Mi", rq["memory"])
			assert.Equal(t, tc.defReq["cpu"], rq["cpu"], "a key not given keeps its default")
			assert.Equal(t, map[string]string{"memory": "2Gi", "cpu": "4"}, lm)
		})
	}
}

// TestDefaultedResources_BadInput: a value that is not a quantity, and a request over the
// default limit, are refused with the attribute's path.
func TestDefaultedResources_BadInput(t *testing.T) {
	over := resource.MustParse(DefaultTransferLimits["memory"])
	over.Add(resource.MustParse("1Mi"))
	errs := Cube{Name: "cube", Namespace: "ads", DonefileURL: testDonefile,
		TransferRequests: map[string]string{"memory": over.String()}, TransferLimits: map[string]string{"cpu": "lots"}}.Validate()
	require.Len(t, errs, 2, "%v", errs)
	assert.Contains(t, errs.Error(), `transfer_resources.limits["cpu"]`)
	assert.Contains(t, errs.Error(), `transfer_resources.requests["memory"]`)
	assert.Contains(t, errs.Error(), "more than the limit "+DefaultTransferLimits["memory"])

	errs = TrainingJob{Name: "t", Namespace: "ads", FileServer: &FileServer{Requests: map[string]string{"cpu": "-1"}}}.Validate()
	require.Len(t, errs, 1, "%v", errs)
	assert.Contains(t, errs.Error(), `file_server.resources.requests["cpu"]`)
}
