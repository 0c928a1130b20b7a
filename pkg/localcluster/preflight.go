package localcluster

// What this machine must allow for the local control plane's pods, checked
// before anything starts: the demo says in a second what a minute of
// starting would end in.

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// CheckPodRunner says whether this process can run pods (RunPod): each
// container is chrooted, which needs root, or a user namespace of the
// process's own in which it is root (sysProcAttr). It starts `true`
// exactly as a container would be started, chrooted into this machine's
// root. Ubuntu 24.04 forbids the second by default (AppArmor's
// kernel.apparmor_restrict_unprivileged_userns=1: the namespace is made,
// but without the right to chroot), other distributions may have user
// namespaces off; the error says which, and what to do.
func CheckPodRunner() error {
	if os.Geteuid() == 0 {
		return nil
	}
	path, err := exec.LookPath("true")
	if err != nil {
		return nil // nothing to try it with; RunPod will tell
	}
	cmd := exec.Command(path)
	cmd.SysProcAttr = sysProcAttr("/")
	out, err := cmd.CombinedOutput()
	if err == nil {
		return nil
	}
	if len(out) > 0 {
		err = fmt.Errorf("%w: %s", err, strings.TrimSpace(string(out)))
	}
	return fmt.Errorf("the local control plane runs its pods chrooted, which takes root or an unprivileged user namespace, and this user (uid %d) cannot have one here (%v)%s",
		os.Geteuid(), err, userNamespaceHint())
}

// userNamespaceHint names the setting that forbids unprivileged user
// namespaces on this machine, if one of the known ones does.
func userNamespaceHint() string {
	read := func(path string) string {
		b, err := os.ReadFile(path)
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(b))
	}
	switch {
	case read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == "1":
		return ": AppArmor restricts them (kernel.apparmor_restrict_unprivileged_userns=1, Ubuntu 24.04's default); " +
			"allow them until the next boot with `sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0`, or run as root"
	case read("/proc/sys/kernel/unprivileged_userns_clone") == "0":
		return ": they are off (kernel.unprivileged_userns_clone=0); `sudo sysctl -w kernel.unprivileged_userns_clone=1`, or run as root"
	case read("/proc/sys/user/max_user_namespaces") == "0":
		return ": they are off (user.max_user_namespaces=0); `sudo sysctl -w user.max_user_namespaces=15000`, or run as root"
	}
	return ": run as root"
}

// SharesHostNetwork says whether the pods RunPod starts share this
// machine's network (not root, or no right to make network namespaces):
// then every port a pod listens on must be free here.
func SharesHostNetwork() bool { return !isolatedNetworks() }

// CheckHostPorts says which of ports (TCP, on every address) something on
// this machine holds already; who names what needs them.
func CheckHostPorts(who string, ports ...int) error {
	var taken []string
	for _, p := range ports {
		l, err := net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(p)))
		if err != nil {
			taken = append(taken, strconv.Itoa(p))
			continue
		}
		_ = l.Close()
	}
	if len(taken) == 0 {
		return nil
	}
	why := "not run as root"
	if networksErr != nil {
		why = networksErr.Error()
	}
	return fmt.Errorf("%s listens on port %s, which something on this machine uses already: the local control plane's pods share this machine's network here (%s). "+
		"Stop what listens there (ss -ltnp 'sport = :%s'), or run as root, where each pod gets a network of its own",
		who, strings.Join(taken, ", "), why, taken[0])
}

// checkPodPorts checks, for a pod that shares this machine's network, the
// TCP ports its containers declare.
func checkPodPorts(pod *corev1.Pod) error {
	var errs []error
	for _, c := range pod.Spec.Containers {
		var ports []int
		for _, p := range c.Ports {
			if p.Protocol == "" || p.Protocol == corev1.ProtocolTCP {
				ports = append(ports, int(p.ContainerPort))
			}
		}
		if len(ports) > 0 {
			errs = append(errs, CheckHostPorts(fmt.Sprintf("container %s of pod %s/%s", c.Name, pod.Namespace, pod.Name), ports...))
		}
	}
	return errors.Join(errs...)
}
