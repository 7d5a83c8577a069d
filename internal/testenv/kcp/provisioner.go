package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

const provisionedBy = "pv.kubernetes.io/provisioned-by"

// runProvisioner provisions host-path volumes for the claims of one StorageClass: a folder
// under --dir per claim, writable by any user (the real node's pods run as non-root, and
// hostPath volumes get no fsGroup), removed with the volume when its claim goes.
// The controller-manager's own host-path provisioner makes root-only folders.
func runProvisioner() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig (required)")
	dir := flag.String("dir", "", "folder that holds the volumes (required)")
	class := flag.String("class", "", "StorageClass whose claims this provisions (required)")
	name := flag.String("name", "", "provisioner name of the StorageClass, recorded on its volumes (required)")
	flag.Parse()
	if *kubeconfig == "" || *dir == "" || *class == "" || *name == "" {
		log.Fatal("provisioner: --kubeconfig, --dir, --class and --name are required")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		log.Fatalf("provisioner: %v", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		log.Fatalf("provisioner: %v", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	p := &provisioner{cs: cs, dir: *dir, class: *class, name: *name}
	log.Printf("provisioner: claims of StorageClass %s get folders in %s", *class, *dir)
	for ctx.Err() == nil {
		if err := p.pass(ctx); err != nil && ctx.Err() == nil {
			log.Printf("provisioner: %v", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(300 * time.Millisecond):
		}
	}
}

type provisioner struct {
	cs               kubernetes.Interface
	dir, class, name string
}

func (p *provisioner) pass(ctx context.Context) error {
	claims, err := p.cs.CoreV1().PersistentVolumeClaims("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for i := range claims.Items {
		c := &claims.Items[i]
		if c.Status.Phase != corev1.ClaimPending || c.Spec.VolumeName != "" || c.Spec.StorageClassName == nil || *c.Spec.StorageClassName != p.class {
			continue
		}
		if err := p.provision(ctx, c); err != nil {
			log.Printf("provisioner: claim %s/%s: %v", c.Namespace, c.Name, err)
		}
	}
	vols, err := p.cs.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for i := range vols.Items {
		v := &vols.Items[i]
		if v.Annotations[provisionedBy] != p.name || v.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete {
			continue
		}
		if v.Status.Phase != corev1.VolumeReleased && v.Status.Phase != corev1.VolumeFailed {
			continue
		}
		if err := os.RemoveAll(filepath.Join(p.dir, v.Name)); err != nil {
			log.Printf("provisioner: volume %s: %v", v.Name, err)
			continue
		}
		if err := p.cs.CoreV1().PersistentVolumes().Delete(ctx, v.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			log.Printf("provisioner: delete volume %s: %v", v.Name, err)
			continue
		}
		log.Printf("provisioner: deleted volume %s (claim %s/%s gone)", v.Name, v.Spec.ClaimRef.Namespace, v.Spec.ClaimRef.Name)
	}
	return nil
}

func (p *provisioner) provision(ctx context.Context, c *corev1.PersistentVolumeClaim) error {
	name := "pvc-" + string(c.UID)
	if _, err := p.cs.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{}); err == nil {
		return nil // made in an earlier pass; the PV controller binds it
	}
	path := filepath.Join(p.dir, name)
	if err := os.MkdirAll(path, 0o777); err != nil {
		return err
	}
	if err := os.Chmod(path, 0o777); err != nil { // not reduced by the umask
		return err
	}
	size, ok := c.Spec.Resources.Requests[corev1.ResourceStorage]
	if !ok {
		return fmt.Errorf("no storage request")
	}
	dirOrCreate := corev1.HostPathDirectoryOrCreate
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{provisionedBy: p.name}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
			AccessModes:                   c.Spec.AccessModes,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			StorageClassName:              p.class,
			VolumeMode:                    c.Spec.VolumeMode,
			ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: c.Namespace, Name: c.Name, UID: c.UID},
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path, Type: &dirOrCreate}},
		},
	}
	if _, err := p.cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	log.Printf("provisioner: claim %s/%s: volume %s at %s", c.Namespace, c.Name, name, path)
	return nil
}
