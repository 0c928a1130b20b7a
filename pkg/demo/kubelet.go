package demo

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/pkg/localcluster"
)

// kubelet plays the kubelet of one Node: every pod the scheduler binds to
// it runs with the pod runner (localcluster.RunPod), which writes the pod's
// status, so that its Deployment becomes available and the Services that
// select it get its endpoint.
type kubelet struct {
	cfg  *rest.Config
	c    client.Client
	node string
	o    localcluster.PodOptions

	mu   sync.Mutex
	pods map[string]*localcluster.Pod // by pod name
	errs map[string]error             // pods that could not start
	seen map[string]bool              // by UID
}

func newKubelet(cfg *rest.Config, c client.Client, node string, o localcluster.PodOptions) *kubelet {
	return &kubelet{cfg: cfg, c: c, node: node, o: o,
		pods: map[string]*localcluster.Pod{}, errs: map[string]error{}, seen: map[string]bool{}}
}

// run looks for new pods every second until ctx ends, then stops them all.
func (k *kubelet) run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer func() {
		wg.Wait()
		k.mu.Lock()
		defer k.mu.Unlock()
		for _, p := range k.pods {
			p.Stop()
		}
	}()
	for {
		var list corev1.PodList
		if err := k.c.List(ctx, &list, client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("spec.nodeName", k.node)}); err == nil {
			for i := range list.Items {
				pod := &list.Items[i]
				k.mu.Lock()
				seen := k.seen[string(pod.UID)]
				k.seen[string(pod.UID)] = true
				k.mu.Unlock()
				if seen || pod.DeletionTimestamp != nil {
					continue
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					p, err := localcluster.RunPod(ctx, k.cfg, pod, k.o)
					k.mu.Lock()
					defer k.mu.Unlock()
					if err != nil {
						k.errs[pod.Name] = err
						return
					}
					k.pods[pod.Name] = p
				}()
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}

// pod returns the running pod of a Deployment (the newest, should its
// template have changed).
func (k *kubelet) pod(deployment string) (*localcluster.Pod, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	var names []string
	for name := range k.pods {
		if strings.HasPrefix(name, deployment+"-") {
			names = append(names, name)
		}
	}
	for name, err := range k.errs {
		if strings.HasPrefix(name, deployment+"-") {
			return nil, fmt.Errorf("pod %s: %w", name, err)
		}
	}
	var running []*localcluster.Pod
	sort.Strings(names)
	for _, n := range names {
		p := k.pods[n]
		select {
		case <-p.Done():
		default:
			running = append(running, p)
		}
	}
	if len(running) == 0 {
		return nil, fmt.Errorf("no pod of Deployment %s runs on %s", deployment, k.node)
	}
	return running[len(running)-1], nil
}

// waitPod waits until a pod of the Deployment runs.
func (k *kubelet) waitPod(ctx context.Context, deployment string) (*localcluster.Pod, error) {
	for {
		p, err := k.pod(deployment)
		if err == nil {
			return p, nil
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// failed says why a pod could not start, or which container ended.
func (k *kubelet) failed() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	var errs []error
	for name, err := range k.errs {
		errs = append(errs, fmt.Errorf("pod %s: %w", name, err))
	}
	for name, p := range k.pods {
		for _, c := range p.Statuses() {
			if len(c.Exits) > 0 {
				errs = append(errs, fmt.Errorf("pod %s: container %s ended: %s", name, c.Name, c.Exits[len(c.Exits)-1]))
			}
		}
	}
	return errors.Join(errs...)
}

// describe is a few lines on each pod.
func (k *kubelet) describe() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	var b strings.Builder
	names := make([]string, 0, len(k.pods))
	for n := range k.pods {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(&b, "pod %s:\n%s", n, k.pods[n].Describe())
	}
	for n, err := range k.errs {
		fmt.Fprintf(&b, "pod %s did not start: %v\n", n, err)
	}
	if b.Len() == 0 {
		return "no pod runs on " + k.node
	}
	return b.String()
}
