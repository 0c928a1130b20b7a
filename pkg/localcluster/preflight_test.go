package localcluster

import (
	"net"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestCheckPodPorts: a pod that shares this machine's network and declares
// a TCP port something here holds is refused before it starts, naming the
// pod, the container and the port; free ports and UDP ones pass.
func TestCheckPodPorts(t *testing.T) {
	taken, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	busy := taken.Addr().(*net.TCPAddr).Port
	free, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	freePort := free.Addr().(*net.TCPAddr).Port
	free.Close()

	pod := PodFromTemplate("ns", "operator", corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{
		{Name: "webhooks", Ports: []corev1.ContainerPort{{ContainerPort: int32(freePort)}, {ContainerPort: int32(busy)}}},
		{Name: "dns", Ports: []corev1.ContainerPort{{ContainerPort: int32(busy), Protocol: corev1.ProtocolUDP}}},
	}}})
	err = checkPodPorts(pod)
	if err == nil {
		t.Fatal("a pod whose port is taken passed")
	}
	for _, want := range []string{"container webhooks of pod ns/operator", "port " + strconv.Itoa(busy), "run as root"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error lacks %q: %v", want, err)
		}
	}
	if strings.Contains(err.Error(), "dns") || strings.Contains(err.Error(), strconv.Itoa(freePort)) {
		t.Errorf("the error names a port that is free or not TCP: %v", err)
	}
	pod.Spec.Containers = pod.Spec.Containers[1:]
	if err := checkPodPorts(pod); err != nil {
		t.Errorf("a UDP port: %v", err)
	}
}
