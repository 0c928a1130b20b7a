package localcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// NodeOptions describe the Node of this machine that RunNode registers.
type NodeOptions struct {
	// Name of the Node.
	Name string
	// IP is the Node's InternalIP, and the IP of the pods RunPod runs on
	// it (they share this machine's network): HostIP.
	IP string
	// Labels and Taints of the Node, e.g. a control plane node's
	// node-role.kubernetes.io/master label and NoSchedule taint.
	Labels map[string]string
	Taints []corev1.Taint
}

// RunNode registers a Node for this machine and keeps it Ready, as a
// kubelet does, until ctx ends: the scheduler binds pods to it, which
// RunPod then runs. It returns once the Node is registered; the
// heartbeat goes on in the background (every 5 s, well within the
// controller-manager's grace period).
func RunNode(ctx context.Context, cfg *rest.Config, o NodeOptions) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	labels := map[string]string{"kubernetes.io/hostname": o.Name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}
	for k, v := range o.Labels {
		labels[k] = v
	}
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("8"),
		corev1.ResourceMemory: resource.MustParse("32Gi"),
		corev1.ResourcePods:   resource.MustParse("250"),
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: o.Name, Labels: labels},
		Spec:       corev1.NodeSpec{Taints: o.Taints},
	}
	node.Status.Capacity, node.Status.Allocatable = capacity, capacity
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: o.IP}, {Type: corev1.NodeHostName, Address: o.Name}}
	node.Status.Conditions = []corev1.NodeCondition{readyCondition(time.Now())}
	node.Status.NodeInfo = corev1.NodeSystemInfo{KubeletVersion: "v1.34.4", OperatingSystem: "linux", Architecture: "amd64", OSImage: "localcluster pod runner"}
	if _, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("registering node %s: %w", o.Name, err)
	}
	go func() {
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				_ = heartbeat(ctx, cs, o.Name, now)
			}
		}
	}()
	return heartbeat(ctx, cs, o.Name, time.Now())
}

func readyCondition(now time.Time) corev1.NodeCondition {
	return corev1.NodeCondition{
		Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "the pod runner is ready",
		LastHeartbeatTime: metav1.NewTime(now), LastTransitionTime: metav1.NewTime(now),
	}
}

// heartbeat reports the Node Ready now (a strategic merge patch of the
// Ready condition, as the kubelet's status update).
func heartbeat(ctx context.Context, cs kubernetes.Interface, name string, now time.Time) error {
	patch := fmt.Sprintf(`{"status":{"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady","message":"the pod runner is ready","lastHeartbeatTime":%q}]}}`,
		now.UTC().Format(time.RFC3339))
	_, err := cs.CoreV1().Nodes().PatchStatus(ctx, name, []byte(patch))
	return err
}

// HostIP is an IPv4 address of this machine other than the loopback one:
// the address pods run by RunPod report (an EndpointSlice refuses loopback
// addresses, so a Service could not route to 127.0.0.1).
func HostIP() (string, error) {
	ifaces, err := net.Interfaces()
	if err != nil {
		return "", err
	}
	for _, iface := range ifaces {
		if iface.Flags&net.FlagUp == 0 || iface.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, err := iface.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			ipn, ok := a.(*net.IPNet)
			if !ok || ipn.IP.To4() == nil || ipn.IP.IsLoopback() || ipn.IP.IsLinkLocalUnicast() {
				continue
			}
			return ipn.IP.String(), nil
		}
	}
	return "", errors.New("this machine has no IPv4 address but the loopback one: a Service cannot route to a pod run here")
}
