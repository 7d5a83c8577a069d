package stack

import (
	"encoding/base64"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Dataset is ElasticCTR's data.config: where the trainers read their samples. The source
// is HDFS (HDFSAddress, HDFSUGI; ElasticCTR's own, and what S3 and Volume are not), an
// S3-compatible bucket (S3) or a volume (Volume); at most one of the three is set.
type Dataset struct {
	HDFSAddress string `json:"hdfs_address,omitempty"`
	// HDFSUGI is secret ("user,password"); it is never stored in the settings annotation and
	// reaches the pods only through a Secret.
	HDFSUGI string         `json:"-"`
	S3      *S3Dataset     `json:"s3,omitempty"`
	Volume  *VolumeDataset `json:"volume,omitempty"`
	// Path is where the samples are in the source: on HDFS, under the bucket, or under the
	// volume's mount path.
	Path      string `json:"path,omitempty"`
	StartHour string `json:"start_hour,omitempty"`
	EndHour   string `json:"end_hour,omitempty"`
	SparseDim int64  `json:"sparse_dim,omitempty"`
}

// S3Dataset is a bucket of an S3-compatible object store: AWS S3, or Baidu Cloud BOS through
// its S3 endpoint (https://s3.<region>.bcebos.com). Trainers get it in the variables AWS's
// SDKs and CLI read (AWS_ENDPOINT_URL, AWS_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)
// and as DATASET_URL=s3://<bucket><path>.
type S3Dataset struct {
	Bucket   string `json:"bucket"`
	Endpoint string `json:"endpoint,omitempty"`
	Region   string `json:"region,omitempty"`
	// CredentialsSecret names a Secret in the job's namespace holding the keys
	// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY: the trainers get them by reference, so no
	// credential passes through Terraform. Empty when the pods have credentials otherwise
	// (IRSA or Workload Identity through pod.service_account_annotations).
	CredentialsSecret string `json:"credentials_secret,omitempty"`
}

// VolumeDataset is an existing PersistentVolumeClaim holding the samples (an NFS share, a CSI
// bucket mount, a cloud file system), mounted read-only into the trainers at MountPath.
type VolumeDataset struct {
	ClaimName string `json:"claim_name"`
	MountPath string `json:"mount_path,omitempty"`
}

// Dataset sources, as DATASET_SOURCE tells the trainers (HDFS sets none, as ElasticCTR's
// images expect).
const (
	DatasetS3     = "s3"
	DatasetVolume = "volume"
	// DefaultDatasetMountPath is where a volume dataset is mounted when mount_path is unset.
	DefaultDatasetMountPath = "/dataset"
	// datasetVolumeName is the trainers' volume of a volume dataset.
	datasetVolumeName = "dataset"
)

// s3CredentialKeys are the keys of an S3 dataset's credentials Secret, and the variables the
// trainers get them in.
var s3CredentialKeys = []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}

// UploadToken returns the token stored in the upload token Secret ("" when there is none).
func UploadToken(secret *unstructured.Unstructured) string { return SecretValue(secret, tokenKey) }

// sourceEnv tells the trainers where the samples are: ElasticCTR's HDFS variables, or
// DATASET_SOURCE with the variables of an S3 bucket or a volume.
func (ds *Dataset) sourceEnv() []corev1.EnvVar {
	val := func(name, v string) corev1.EnvVar { return corev1.EnvVar{Name: name, Value: v} }
	switch {
	case ds.S3 != nil:
		s3 := ds.S3
		env := []corev1.EnvVar{val("DATASET_SOURCE", DatasetS3), val("DATASET_URL", "s3://"+s3.Bucket+ds.Path),
			val("S3_BUCKET", s3.Bucket), val("DATASET_PATH", ds.Path)}
		if s3.Endpoint != "" {
			env = append(env, val("AWS_ENDPOINT_URL", s3.Endpoint))
		}
		if s3.Region != "" {
			env = append(env, val("AWS_REGION", s3.Region))
		}
		if s3.CredentialsSecret != "" {
			for _, k := range s3CredentialKeys {
				env = append(env, corev1.EnvVar{Name: k, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: s3.CredentialsSecret}, Key: k}}})
			}
		}
		return env
	case ds.Volume != nil:
		return []corev1.EnvVar{val("DATASET_SOURCE", DatasetVolume), val("DATASET_PATH", cleanJoin(ds.volumeMountPath(), ds.Path))}
	default:
		return []corev1.EnvVar{val("HDFS_ADDRESS", ds.HDFSAddress), val("DATASET_PATH", ds.Path)}
	}
}

func (ds *Dataset) volumeMountPath() string {
	if ds.Volume.MountPath != "" {
		return ds.Volume.MountPath
	}
	return DefaultDatasetMountPath
}

// mountVolume mounts a volume dataset read-only into a trainer's pod.
func (ds *Dataset) mountVolume(c *corev1.Container, spec *corev1.PodSpec) {
	if ds == nil || ds.Volume == nil {
		return
	}
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: datasetVolumeName, MountPath: ds.volumeMountPath(), ReadOnly: true})
	spec.Volumes = append(spec.Volumes, corev1.Volume{Name: datasetVolumeName, VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: ds.Volume.ClaimName, ReadOnly: true}}})
}

// DatasetUGI returns the UGI stored in the dataset Secret ("" when there is none).
func DatasetUGI(secret *unstructured.Unstructured) string { return SecretValue(secret, datasetUGIKey) }

// SecretValue returns the decoded value of key in a Secret ("" when absent).
func SecretValue(secret *unstructured.Unstructured, key string) string {
	if secret == nil {
		return ""
	}
	v, _, _ := unstructured.NestedString(secret.Object, "data", key)
	b, err := base64.StdEncoding.DecodeString(v)
	if err != nil {
		return ""
	}
	return string(b)
}
