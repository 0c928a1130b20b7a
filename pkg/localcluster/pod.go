package localcluster

// The pod runner: the kubelet's part for one pod, on this machine, with
// the real binaries of the pod's images. It lets a test run what a
// Deployment says — exactly its containers' commands, arguments,
// environment and mounted Secrets and ConfigMaps, authenticated as the
// pod's service account with a token from the TokenRequest API — rather
// than what the test thinks the Deployment says.
//
// How to use it (test/matrix does this):
//
//	ip, _ := localcluster.HostIP()
//	// a Node for the scheduler to bind pods to, kept Ready
//	_ = localcluster.RunNode(ctx, admin, localcluster.NodeOptions{Name: "master-0", IP: ip,
//		Labels: map[string]string{"node-role.kubernetes.io/master": ""}})
//	// wait for the pod the Deployment's ReplicaSet made and the scheduler
//	// bound to master-0, then play its kubelet
//	pod, _ := localcluster.RunPod(ctx, admin, boundPod, localcluster.PodOptions{
//		Images: map[string]string{"quay.io/openshift/origin-machine-api-operator:4.16": "bin/mao-4.16"},
//		Dir: t.TempDir(), HostIP: ip})
//	defer pod.Stop()
//	... pod.Statuses(): restarts, exits with their termination messages,
//	    probe results; the Pod object's status says the same (the
//	    endpoints of the Services that select the pod follow it)
//
// RunPod takes a Pod read from the API server (then it writes its status
// and ends when the Pod is deleted, confirming the deletion as the kubelet
// does), or one built from a template (PodFromTemplate) that the API
// server never saw (then it writes nothing). admin is the kubelet's
// client: it reads the Secrets and ConfigMaps, requests the tokens and
// writes the status; the containers never see it.
//
// Each container runs as one process, chrooted into its own root under
// Dir (<Dir>/<pod>/<container>/root) that holds the image's binary at the
// command's path, the container's volume mounts (Secrets, ConfigMaps,
// projected service account tokens, emptyDirs) and /tmp. The binaries must
// be static (CGO_ENABLED=0): the root has no libraries. The runner must be
// root, or the process gets a user namespace to chroot in. The containers
// have a network of their own (pod_network.go: run as root, with the
// capabilities to make network namespaces and veth pairs), so that pods
// never collide on a port, with each other or with anything else on this
// machine; run otherwise, they share this machine's network, as
// hostNetwork pods would, and their ports must be free.
//
// Images says which local directory plays which image: a container's
// binary is <dir><command[0]> (a command that is a name, not a path, is
// put at /usr/bin/<name>, where the runtime would find it in the image's
// PATH; argv[0] stays the name). A container whose image has no entry (a
// kube-rbac-proxy sidecar) is not run: it is reported as skipped, and
// counts as running and ready in the pod's status (such sidecars have no
// probes: a kubelet would find them ready once started), so that the pod
// can get Ready.
//
// Probes (HTTP GET and TCP; startup, readiness, liveness) run as the
// kubelet runs them, with the API server's defaults for unset fields. A
// container that ends, or fails its liveness probe, is started again after
// the kubelet's back-off (10 s, doubling to 5 minutes) under restartPolicy
// Always; its exit code and termination message (the termination-log file,
// or with FallbackToLogsOnError the last 80 lines / 2048 bytes of its
// output) are kept. Each container's output goes to <Dir>/<pod>/<name>.log.
//
// Not supported: init and ephemeral containers, exec and gRPC probes,
// volumes other than the four kinds above, resources and security
// contexts (the processes run as the runner's user), and refreshing
// tokens or mounted Secrets after the start (tokens last an hour).

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
)

// PodOptions configure RunPod.
type PodOptions struct {
	// Images maps an image (exactly as the pod names it) to the local
	// directory that plays it.
	Images map[string]string
	// Dir receives the containers' roots and logs (under <Dir>/<pod>).
	Dir string
	// HostIP is this machine's address: the pod's IP (HostIP()).
	HostIP string
	// NodeName is the pod's node when its spec names none (a pod from a
	// template).
	NodeName string
	// RestartBackoff is the first wait before a container is started
	// again (default 10 s, the kubelet's); it doubles up to 5 minutes.
	RestartBackoff time.Duration
	// Log receives the runner's own lines: starts, exits, probe failures.
	Log logr.Logger
	// Reach are the addresses on this machine ("127.0.0.1:8282": an
	// emulator) the pod's containers connect to, besides the API server,
	// which they reach anyway. A pod with a network of its own
	// (pod_network.go) reaches only these and the API server.
	Reach []string
}

// Pod is a running pod.
type Pod struct {
	Namespace, Name string

	o       PodOptions
	cs      kubernetes.Interface
	pod     *corev1.Pod // as read, never changed
	fromAPI bool
	api     apiServer
	dir     string
	// net is the pod's own network, nil when it shares this machine's
	// (pod_network.go).
	net *podNet

	mu         sync.Mutex
	containers []*container
	startTime  metav1.Time
	stopping   bool

	changed chan struct{}
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	done    chan struct{}
	stopMu  sync.Mutex
}

// apiServer is where the containers find the API server: the in-cluster
// environment and service account files.
type apiServer struct {
	host, port string
	ca         []byte
}

// ContainerStatus is what the runner knows of one container.
type ContainerStatus struct {
	Name, Image string
	// Skipped: the image has no local binary; the container is not run.
	Skipped bool
	// Running: its process is up; Started: its startup probe passed (or
	// it has none); Ready: its readiness probe passes (or it has none).
	Running, Started, Ready bool
	// Restarts counts the times it was started again.
	Restarts int
	// Exits are its terminations, oldest first.
	Exits []Exit
	// Waiting says why it is not running ("CrashLoopBackOff",
	// "CreateContainerConfigError: ...").
	Waiting string
}

// Exit is one termination of a container.
type Exit struct {
	Code int
	// Reason: "Error", "Completed", "Killed" (by the runner: a failed
	// liveness or startup probe, or the pod stopping).
	Reason string
	// Message is the termination message.
	Message string
	// Head is the start of the run's output (5 lines, at most 1 KiB):
	// what a program says first when it stops at once, e.g. the error
	// before a usage text that fills the termination message.
	Head string
	At   time.Time
}

func (e Exit) String() string {
	return fmt.Sprintf("exit code %d (%s): %s", e.Code, e.Reason, strings.TrimSpace(e.Message))
}

// PodFromTemplate is the pod a ReplicaSet would make of t in namespace ns,
// named name, bound to no node: for RunPod without the API server.
func PodFromTemplate(ns, name string, t corev1.PodTemplateSpec) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: t.Labels, Annotations: t.Annotations},
		Spec:       *t.Spec.DeepCopy(),
	}
}

// RunPod starts pod's containers and returns once they are started (their
// volumes and tokens written); it waits for the Secrets and ConfigMaps the
// volumes need as the kubelet waits, until ctx ends. The pod runs until
// Stop, until ctx ends, or, for a pod of the API server, until it is
// deleted.
func RunPod(ctx context.Context, admin *rest.Config, pod *corev1.Pod, o PodOptions) (*Pod, error) {
	if o.HostIP == "" {
		return nil, errors.New("PodOptions.HostIP is required (localcluster.HostIP)")
	}
	if o.RestartBackoff == 0 {
		o.RestartBackoff = 10 * time.Second
	}
	if o.Log.GetSink() == nil {
		o.Log = logr.Discard()
	}
	cs, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return nil, err
	}
	api, err := apiServerOf(admin)
	if err != nil {
		return nil, err
	}
	pod = pod.DeepCopy()
	if pod.Namespace == "" {
		pod.Namespace = metav1.NamespaceDefault
	}
	if pod.Spec.NodeName == "" {
		pod.Spec.NodeName = o.NodeName
	}
	if pod.Spec.ServiceAccountName == "" {
		pod.Spec.ServiceAccountName = "default"
	}
	if len(pod.Spec.InitContainers) > 0 || len(pod.Spec.EphemeralContainers) > 0 {
		return nil, fmt.Errorf("pod %s/%s: init and ephemeral containers are not supported", pod.Namespace, pod.Name)
	}
	p := &Pod{
		Namespace: pod.Namespace, Name: pod.Name,
		o: o, cs: cs, pod: pod, fromAPI: pod.UID != "", api: api,
		dir:     filepath.Join(o.Dir, pod.Name),
		changed: make(chan struct{}, 1),
		done:    make(chan struct{}),
	}
	for i := range pod.Spec.Containers {
		c, err := p.newContainer(&pod.Spec.Containers[i])
		if err != nil {
			return nil, err
		}
		p.containers = append(p.containers, c)
	}
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		return nil, err
	}
	if !isolatedNetworks() {
		o.Log.Info("the pod shares this machine's network: its ports must be free", "pod", pod.Name, "why", networksErr.Error())
		// Said now, rather than by a container that exits and is
		// started again until someone reads its log.
		if err := checkPodPorts(pod); err != nil {
			return nil, err
		}
	} else {
		reach := append([]string{net.JoinHostPort(api.host, api.port)}, o.Reach...)
		if p.net, err = newPodNet(pod, reach, o.Log); err != nil {
			return nil, err
		}
	}
	started := false
	defer func() {
		if !started && p.net != nil {
			p.net.close()
		}
	}()
	files, err := p.volumeFiles(ctx)
	if err != nil {
		return nil, err
	}
	for _, c := range p.containers {
		if c.skipped {
			o.Log.Info("image not mapped to a local binary: container skipped", "pod", p.Name, "container", c.spec.Name, "image", c.spec.Image)
			continue
		}
		if err := c.makeRoot(files); err != nil {
			return nil, fmt.Errorf("container %s: %w", c.spec.Name, err)
		}
	}

	started = true
	runCtx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	p.startTime = metav1.Now()
	for _, c := range p.containers {
		if c.skipped {
			continue
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			c.supervise(runCtx)
		}()
	}
	if p.fromAPI {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.writeStatus(runCtx)
		}()
		go p.watchDeletion(runCtx)
	}
	go func() {
		select {
		case <-ctx.Done():
			p.Stop()
		case <-p.done:
		}
	}()
	p.notify()
	return p, nil
}

// apiServerOf is the address and CA of the API server admin talks to.
func apiServerOf(admin *rest.Config) (apiServer, error) {
	u, err := url.Parse(admin.Host)
	if err != nil || u.Hostname() == "" {
		return apiServer{}, fmt.Errorf("the API server's address %q: %v", admin.Host, err)
	}
	port := u.Port()
	if port == "" {
		port = "443"
	}
	ca := admin.CAData
	if len(ca) == 0 && admin.CAFile != "" {
		if ca, err = os.ReadFile(admin.CAFile); err != nil {
			return apiServer{}, err
		}
	}
	if len(ca) == 0 {
		return apiServer{}, errors.New("the API server's CA is not known (no CAData or CAFile): the containers could not verify it")
	}
	return apiServer{host: u.Hostname(), port: port, ca: ca}, nil
}

// Statuses are the containers' statuses, in the pod's order.
func (p *Pod) Statuses() []ContainerStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]ContainerStatus, 0, len(p.containers))
	for _, c := range p.containers {
		out = append(out, c.statusLocked())
	}
	return out
}

// Ready reports whether every container is ready (skipped ones count as
// ready), as the pod's Ready condition.
func (p *Pod) Ready() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.readyLocked()
}

func (p *Pod) readyLocked() bool {
	for _, c := range p.containers {
		if !c.skipped && !c.ready {
			return false
		}
	}
	return true
}

// Done is closed once the pod has stopped.
func (p *Pod) Done() <-chan struct{} { return p.done }

// Stop stops every container (SIGTERM, then SIGKILL after the pod's
// termination grace period) and waits for them. The Pod object, if any,
// is left as it is.
func (p *Pod) Stop() {
	p.stopMu.Lock()
	defer p.stopMu.Unlock()
	select {
	case <-p.done:
		return
	default:
	}
	p.mu.Lock()
	p.stopping = true
	p.mu.Unlock()
	grace := 30 * time.Second
	if g := p.pod.Spec.TerminationGracePeriodSeconds; g != nil {
		grace = time.Duration(*g) * time.Second
	}
	var wg sync.WaitGroup
	for _, c := range p.containers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.kill(grace, "Killed")
		}()
	}
	wg.Wait()
	p.cancel()
	p.wg.Wait()
	if p.net != nil {
		p.net.close()
	}
	close(p.done)
}

// IP is the pod's IP: of its own network, or this machine's
// (PodOptions.HostIP) when it shares it.
func (p *Pod) IP() string {
	if p.net != nil {
		return p.net.ip.String()
	}
	return p.o.HostIP
}

// dialContext connects to addr as the pod's containers would: from inside
// its network.
func (p *Pod) dialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	if p.net != nil {
		return p.net.dial(ctx, addr)
	}
	return (&net.Dialer{}).DialContext(ctx, network, addr)
}

// notify tells the status writer that something changed.
func (p *Pod) notify() {
	select {
	case p.changed <- struct{}{}:
	default:
	}
}

// watchDeletion stops the pod when the API server deletes it or marks it
// for deletion, and then confirms the deletion (a Pod bound to a node is
// removed only once its kubelet says its containers are gone).
func (p *Pod) watchDeletion(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cur, err := p.cs.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err) || (err == nil && cur.UID != p.pod.UID):
			p.o.Log.Info("pod deleted: stopping it", "pod", p.Name)
			go p.Stop()
			return
		case err != nil:
			continue
		case cur.DeletionTimestamp != nil:
			p.o.Log.Info("pod marked for deletion: stopping it", "pod", p.Name)
			go func() {
				p.Stop()
				_ = p.cs.CoreV1().Pods(p.Namespace).Delete(context.Background(), p.Name, metav1.DeleteOptions{
					GracePeriodSeconds: ptr.To[int64](0),
					Preconditions:      &metav1.Preconditions{UID: &p.pod.UID},
				})
			}()
			return
		}
	}
}

// writeStatus keeps the Pod object's status in step with the containers,
// as the kubelet's status manager does.
func (p *Pod) writeStatus(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.changed:
		}
		// coalesce bursts of changes
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
		err := retry.OnError(wait.Backoff{Steps: 5, Duration: 200 * time.Millisecond, Factor: 2}, func(error) bool { return true }, func() error {
			cur, err := p.cs.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if cur.UID != p.pod.UID {
				return nil
			}
			p.mu.Lock()
			cur.Status = p.podStatusLocked()
			p.mu.Unlock()
			_, err = p.cs.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
			return err
		})
		if err != nil && ctx.Err() == nil && !apierrors.IsNotFound(err) {
			p.o.Log.Error(err, "writing the pod's status", "pod", p.Name)
		}
	}
}

func (p *Pod) podStatusLocked() corev1.PodStatus {
	now := metav1.Now()
	cond := func(t corev1.PodConditionType, ok bool) corev1.PodCondition {
		s := corev1.ConditionFalse
		if ok {
			s = corev1.ConditionTrue
		}
		return corev1.PodCondition{Type: t, Status: s, LastTransitionTime: now}
	}
	running := false
	var statuses []corev1.ContainerStatus
	for _, c := range p.containers {
		running = running || c.running
		statuses = append(statuses, c.apiStatusLocked())
	}
	phase := corev1.PodPending
	if running {
		phase = corev1.PodRunning
	}
	ready := p.readyLocked()
	ips := []corev1.PodIP{{IP: p.IP()}}
	return corev1.PodStatus{
		Phase: phase,
		Conditions: []corev1.PodCondition{
			cond(corev1.PodReadyToStartContainers, true),
			cond(corev1.PodInitialized, true),
			cond(corev1.ContainersReady, ready),
			cond(corev1.PodReady, ready),
			cond(corev1.PodScheduled, true),
		},
		HostIP: p.o.HostIP, HostIPs: []corev1.HostIP{{IP: p.o.HostIP}},
		PodIP: p.IP(), PodIPs: ips,
		StartTime:         &p.startTime,
		ContainerStatuses: statuses,
		QOSClass:          corev1.PodQOSBurstable,
	}
}

// Describe is a few lines on each container: state, restarts and the last
// exit, for a test's failure message.
func (p *Pod) Describe() string {
	var b strings.Builder
	for _, s := range p.Statuses() {
		switch {
		case s.Skipped:
			fmt.Fprintf(&b, "%s: skipped (image %s is not mapped to a local binary)\n", s.Name, s.Image)
			continue
		case s.Running:
			fmt.Fprintf(&b, "%s: running, started %t, ready %t, %d restarts\n", s.Name, s.Started, s.Ready, s.Restarts)
		default:
			fmt.Fprintf(&b, "%s: not running (%s), %d restarts\n", s.Name, s.Waiting, s.Restarts)
		}
		if n := len(s.Exits); n > 0 {
			e := s.Exits[n-1]
			fmt.Fprintf(&b, "  last exit: exit code %d (%s); its output began:\n    %s\n  and ended (termination message):\n    %s\n",
				e.Code, e.Reason, strings.ReplaceAll(strings.TrimSpace(e.Head), "\n", "\n    "), strings.ReplaceAll(strings.TrimSpace(lastLines(e.Message, 5)), "\n", "\n    "))
		}
	}
	return b.String()
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// Skipped names the containers that are not run.
func (p *Pod) Skipped() []string {
	var out []string
	for _, c := range p.containers {
		if c.skipped {
			out = append(out, c.spec.Name)
		}
	}
	return slices.Clip(out)
}
