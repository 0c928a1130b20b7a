package deployer_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/appuio/machine-api-provider/pkg/controllers/deployer"
	"github.com/appuio/machine-api-provider/pkg/testenv"
)

const (
	timeout      = 20 * time.Second
	providerImg  = "ghcr.io/appuio/machine-api-provider:test"
	maoImg1      = "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:1111"
	proxyImg1    = "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:2222"
	maoImg2      = "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:3333"
	proxyImg2    = "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:4444"
	awsImg       = "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:5555"
	handEditedTo = "docker.io/library/busybox:latest"
)

func init() {
	log.SetLogger(funcr.New(func(prefix, args string) {
		if testing.Verbose() {
			fmt.Fprintln(os.Stderr, prefix, args)
		}
	}, funcr.Options{Verbosity: 1}))
}

// TestController runs the deployer's manager against envtest. Every subtest
// has its own namespace (standing in for openshift-machine-api) and manager.
// envtest runs no controllers: Deployments get no pods and deleted ones
// leave no ReplicaSets behind, which is all the deployer looks at.
func TestController(t *testing.T) {
	cfg, _ := testenv.Start(t)

	t.Run("DeploysFromImages", func(t *testing.T) {
		e := start(t, cfg)
		e.createImages(maoImg1, proxyImg1)
		d := e.waitDeployment(func(d *appsv1.Deployment) bool { return true })

		want := map[string]struct {
			image   string
			command string
			args    []string
			ports   map[string]int32
		}{
			"machineset-controller": {maoImg1, "/machineset-controller",
				[]string{"--leader-elect=true", "--leader-elect-lease-duration=120s", "--namespace=" + e.ns, "--metrics-bind-address=127.0.0.1:8082"},
				map[string]int32{"webhook-server": 8443, "ms-healthz": 9441}},
			"machine-controller": {providerImg, "/machine-api-provider manager",
				[]string{"--namespace=" + e.ns, "--leader-elect=true", "--metrics-bind-address=127.0.0.1:8081", "--health-probe-bind-address=:9440"},
				map[string]int32{"machine-healthz": 9440}},
			"nodelink-controller": {maoImg1, "/nodelink-controller",
				[]string{"--leader-elect=true", "--namespace=" + e.ns}, nil},
			"machine-healthcheck-controller": {maoImg1, "/machine-healthcheck",
				[]string{"--leader-elect=true", "--namespace=" + e.ns, "--metrics-bind-address=127.0.0.1:8083"},
				map[string]int32{"mhc-healthz": 9442}},
			"kube-rbac-proxy-machineset-mtrc": {proxyImg1, "",
				[]string{"--secure-listen-address=0.0.0.0:8442", "--upstream=http://127.0.0.1:8082/"},
				map[string]int32{"machineset-mtrc": 8442}},
			"kube-rbac-proxy-machine-mtrc": {proxyImg1, "",
				[]string{"--secure-listen-address=0.0.0.0:8441", "--upstream=http://127.0.0.1:8081/"},
				map[string]int32{"machine-mtrc": 8441}},
			"kube-rbac-proxy-mhc-mtrc": {proxyImg1, "",
				[]string{"--secure-listen-address=0.0.0.0:8444", "--upstream=http://127.0.0.1:8083/"},
				map[string]int32{"mhc-mtrc": 8444}},
		}
		cs := d.Spec.Template.Spec.Containers
		if len(cs) != len(want) {
			t.Errorf("%d containers %v, want %d", len(cs), names(cs), len(want))
		}
		for _, c := range cs {
			w, ok := want[c.Name]
			if !ok {
				t.Errorf("unexpected container %q", c.Name)
				continue
			}
			if c.Image != w.image {
				t.Errorf("%s: image %q, want %q", c.Name, c.Image, w.image)
			}
			if got := strings.Join(c.Command, " "); got != w.command {
				t.Errorf("%s: command %q, want %q", c.Name, got, w.command)
			}
			for _, a := range w.args {
				if !contains(c.Args, a) {
					t.Errorf("%s: args %v lack %s", c.Name, c.Args, a)
				}
			}
			for _, p := range c.Ports {
				if w.ports[p.Name] != p.ContainerPort {
					t.Errorf("%s: port %s=%d, want %v", c.Name, p.Name, p.ContainerPort, w.ports)
				}
			}
			if len(c.Ports) != len(w.ports) {
				t.Errorf("%s: ports %v, want %v", c.Name, c.Ports, w.ports)
			}
		}
		ps := d.Spec.Template.Spec
		if ps.PriorityClassName != "system-node-critical" || ps.ServiceAccountName != "machine-api-controllers" {
			t.Errorf("priority class %q, service account %q", ps.PriorityClassName, ps.ServiceAccountName)
		}
		if _, ok := ps.NodeSelector["node-role.kubernetes.io/master"]; !ok {
			t.Errorf("node selector %v", ps.NodeSelector)
		}
		if d.Labels[deployer.ManagedByLabel] != deployer.ManagedByValue {
			t.Errorf("labels %v", d.Labels)
		}
		if !ownsField(d, "f:spec") {
			t.Errorf("field manager %s does not own the spec: %+v", deployer.ManagedByValue, d.ManagedFields)
		}

		c := e.waitCondition(metav1.ConditionTrue, deployer.ReasonApplied)
		for _, img := range []string{maoImg1, proxyImg1, providerImg} {
			if !strings.Contains(c.Message, img) {
				t.Errorf("condition message %q does not name %s", c.Message, img)
			}
		}
		e.waitEvent(corev1.EventTypeNormal, deployer.ReasonApplied, maoImg1)
	})

	t.Run("RollsOnImageChange", func(t *testing.T) {
		e := start(t, cfg)
		e.createImages(maoImg1, proxyImg1)
		before := e.waitDeployment(func(d *appsv1.Deployment) bool { return true })
		hashBefore := before.Spec.Template.Annotations[deployer.ImagesHashAnnotation]

		cm := &corev1.ConfigMap{}
		e.must(e.c.Get(e.ctx, types.NamespacedName{Namespace: e.ns, Name: deployer.ImagesConfigMap}, cm))
		cm.Data[deployer.ImagesKey] = imagesJSON(maoImg2, proxyImg2)
		e.must(e.c.Update(e.ctx, cm))

		after := e.waitDeployment(func(d *appsv1.Deployment) bool {
			return image(d, "machineset-controller") == maoImg2
		})
		for name, want := range map[string]string{
			"machineset-controller":           maoImg2,
			"nodelink-controller":             maoImg2,
			"machine-healthcheck-controller":  maoImg2,
			"kube-rbac-proxy-machineset-mtrc": proxyImg2,
			"kube-rbac-proxy-machine-mtrc":    proxyImg2,
			"kube-rbac-proxy-mhc-mtrc":        proxyImg2,
			"machine-controller":              providerImg,
		} {
			if got := image(after, name); got != want {
				t.Errorf("%s: image %q, want %q", name, got, want)
			}
		}
		if h := after.Spec.Template.Annotations[deployer.ImagesHashAnnotation]; h == "" || h == hashBefore {
			t.Errorf("images hash %q, before %q: want a new one", h, hashBefore)
		}
		if after.UID != before.UID {
			t.Errorf("Deployment was recreated, want it updated in place")
		}
		e.waitEvent(corev1.EventTypeNormal, deployer.ReasonApplied, maoImg2)
	})

	t.Run("RefusesBesideOperator", func(t *testing.T) {
		e := start(t, cfg)
		op := operatorDeployment(e.ns)
		e.must(e.c.Create(e.ctx, op))
		e.createImages(maoImg1, proxyImg1)

		c := e.waitCondition(metav1.ConditionFalse, deployer.ReasonOperatorDeploymentPresent)
		if !strings.Contains(c.Message, deployer.OperatorDeploymentName) {
			t.Errorf("condition message %q does not name the operator's Deployment", c.Message)
		}
		e.waitEvent(corev1.EventTypeWarning, deployer.ReasonOperatorDeploymentPresent, deployer.OperatorDeploymentName)
		e.consistentlyNoDeployment(2 * time.Second)

		// The platform turns out unsupported after all: the operator's
		// Deployment goes, ours comes.
		e.must(e.c.Delete(e.ctx, op))
		e.waitDeployment(func(d *appsv1.Deployment) bool { return true })
		e.waitCondition(metav1.ConditionTrue, deployer.ReasonApplied)

		// And back: the operator deploys its own again; ours goes.
		e.must(e.c.Create(e.ctx, operatorDeployment(e.ns)))
		e.waitNoDeployment()
		e.waitCondition(metav1.ConditionFalse, deployer.ReasonOperatorDeploymentPresent)
		e.waitEvent(corev1.EventTypeNormal, deployer.ReasonDeploymentDeleted, e.name)
		// one warning per refusal (the recorder may fold them into one
		// Event with a count)
		e.poll("a second refusal event", func() (bool, string) {
			n := e.eventCount(deployer.ReasonOperatorDeploymentPresent)
			return n == 2, fmt.Sprintf("%d refusal events", n)
		})
		op = &appsv1.Deployment{}
		e.must(e.c.Get(e.ctx, types.NamespacedName{Namespace: e.ns, Name: deployer.OperatorDeploymentName}, op))
		if image(op, "machine-controller") != "operator-image" {
			t.Errorf("the operator's Deployment was changed: %v", op.Spec.Template.Spec.Containers)
		}
	})

	// appuio's cloudscale.ch provider runs its machine controller in its
	// component's Deployment, and its manager there applies the operator's
	// controllers as appuio-machine-api-controllers: while either is there,
	// ours would act on the same Machines.
	t.Run("RefusesBesideAppuio", func(t *testing.T) {
		e := start(t, cfg)
		e.createImages(maoImg1, proxyImg1)
		e.waitDeployment(func(d *appsv1.Deployment) bool { return true })
		for _, name := range []string{deployer.AppuioManagerDeployment, deployer.AppuioControllersDeployment} {
			appuio := operatorDeployment(e.ns)
			appuio.Name = name
			e.must(e.c.Create(e.ctx, appuio))
			e.waitNoDeployment()
			c := e.waitCondition(metav1.ConditionFalse, deployer.ReasonAppuioProviderPresent)
			if !strings.Contains(c.Message, name) || !strings.Contains(c.Message, "switch-from-appuio") {
				t.Errorf("condition message %q names neither %s nor the switch", c.Message, name)
			}
			e.consistentlyNoDeployment(2 * time.Second)
			// The switch removes it: ours comes.
			e.must(e.c.Delete(e.ctx, appuio))
			e.waitDeployment(func(d *appsv1.Deployment) bool { return true })
			e.waitCondition(metav1.ConditionTrue, deployer.ReasonApplied)
		}
		e.waitEvent(corev1.EventTypeNormal, deployer.ReasonDeploymentDeleted, deployer.AppuioControllersDeployment)
	})

	t.Run("RepairsDrift", func(t *testing.T) {
		e := start(t, cfg)
		e.createImages(maoImg1, proxyImg1)
		first := e.waitDeployment(func(d *appsv1.Deployment) bool { return true })

		e.must(e.c.Delete(e.ctx, first))
		second := e.waitDeployment(func(d *appsv1.Deployment) bool { return d.UID != first.UID })
		if image(second, "machineset-controller") != maoImg1 {
			t.Errorf("recreated Deployment runs %q", image(second, "machineset-controller"))
		}

		// Someone edits a container image and the replicas by hand
		// (an update, as `oc edit` does).
		err := retryConflict(func() error {
			d := e.getDeployment()
			setImage(d, "nodelink-controller", handEditedTo)
			d.Spec.Replicas = ptr.To[int32](3)
			return e.c.Update(e.ctx, d)
		})
		e.must(err)
		repaired := e.waitDeployment(func(d *appsv1.Deployment) bool {
			return image(d, "nodelink-controller") == maoImg1 && *d.Spec.Replicas == 1
		})
		if repaired.UID != second.UID {
			t.Errorf("Deployment was recreated, want it repaired in place")
		}
		// Fields the deployer does not set stay as others set them: after
		// the reconcile the change causes (a Deployment's annotations are
		// watched), the annotation is still there.
		before := e.reconciles()
		err = retryConflict(func() error {
			d := e.getDeployment()
			if d.Annotations == nil {
				d.Annotations = map[string]string{}
			}
			d.Annotations["example.com/note"] = "kept"
			return e.c.Update(e.ctx, d)
		})
		e.must(err)
		e.poll("a reconcile after the annotation", func() (bool, string) {
			n := e.reconciles()
			return n > before, fmt.Sprintf("%v reconciles, %v before", n, before)
		})
		if got := e.getDeployment().Annotations["example.com/note"]; got != "kept" {
			t.Errorf("a foreign annotation was removed")
		}
	})

	t.Run("ReportsApplyFailure", func(t *testing.T) {
		// The API server rejects a service account name that is no DNS
		// subdomain.
		e := start(t, cfg, func(o *deployer.Options) { o.ServiceAccount = "Not_A_Name" })
		e.createImages(maoImg1, proxyImg1)
		c := e.waitCondition(metav1.ConditionFalse, deployer.ReasonApplyFailed)
		if !strings.Contains(c.Message, "serviceAccountName") {
			t.Errorf("condition message %q does not carry the API server's reason", c.Message)
		}
		e.waitEvent(corev1.EventTypeWarning, deployer.ReasonApplyFailed, e.name)
		e.consistentlyNoDeployment(time.Second)
	})

	t.Run("PlainCluster", func(t *testing.T) { testPlainCluster(t, cfg) })

	// Another cloud: the Deployment is named after it, is watched under
	// that name (deleted, it comes back) and goes under that name when the
	// operator deploys its own; the cloudscale.ch name is never used.
	t.Run("NamedAfterTheCloud", func(t *testing.T) {
		e := start(t, cfg, func(o *deployer.Options) { o.Cloud = "othercloud" })
		if e.name != "machine-api-controllers-othercloud" {
			t.Fatalf("the Deployment for othercloud is named %s", e.name)
		}
		e.createImages(maoImg1, proxyImg1)
		first := e.waitDeployment(func(d *appsv1.Deployment) bool { return true })
		if l := first.Spec.Template.Labels["app.kubernetes.io/instance"]; l != e.name {
			t.Errorf("the pods' instance label is %q, want %s", l, e.name)
		}
		c := e.waitCondition(metav1.ConditionTrue, deployer.ReasonApplied)
		if !strings.Contains(c.Message, e.name) {
			t.Errorf("condition message %q does not name the Deployment %s", c.Message, e.name)
		}
		e.must(e.c.Delete(e.ctx, first))
		e.waitDeployment(func(d *appsv1.Deployment) bool { return d.UID != first.UID })

		e.must(e.c.Create(e.ctx, operatorDeployment(e.ns)))
		e.waitNoDeployment()
		e.waitEvent(corev1.EventTypeNormal, deployer.ReasonDeploymentDeleted, e.name)
		var list appsv1.DeploymentList
		e.must(e.c.List(e.ctx, &list, client.InNamespace(e.ns)))
		for _, d := range list.Items {
			if d.Name != deployer.OperatorDeploymentName {
				t.Errorf("Deployment %s is left; only the operator's should be", d.Name)
			}
		}
	})

	t.Run("ImagesMissing", func(t *testing.T) {
		e := start(t, cfg)
		c := e.waitCondition(metav1.ConditionFalse, deployer.ReasonImagesUnavailable)
		if !strings.Contains(c.Message, deployer.ImagesConfigMap) {
			t.Errorf("condition message %q does not name the ConfigMap", c.Message)
		}
		e.waitEvent(corev1.EventTypeWarning, deployer.ReasonImagesUnavailable, deployer.ImagesConfigMap)

		// No hot loop: no more reconciles, the status is not rewritten,
		// the warning not repeated, and nothing is deployed.
		status := e.statusConfigMap()
		reconciles := e.reconciles()
		if reconciles < 1 {
			t.Fatalf("no reconcile counted: is the metric still controller_runtime_reconcile_total?")
		}
		e.consistentlyNoDeployment(3 * time.Second)
		if n := e.reconciles(); n != reconciles {
			t.Errorf("%v reconciles while nothing changed", n-reconciles)
		}
		if rv := e.statusConfigMap().ResourceVersion; rv != status.ResourceVersion {
			t.Errorf("status ConfigMap rewritten (%s -> %s) while nothing changed", status.ResourceVersion, rv)
		}
		if n := e.eventCount(deployer.ReasonImagesUnavailable); n != 1 {
			t.Errorf("%d ImagesUnavailable events, want 1", n)
		}

		// A ConfigMap without a usable images.json.
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: deployer.ImagesConfigMap, Namespace: e.ns},
			Data:       map[string]string{deployer.ImagesKey: `{"clusterAPIControllerAWS": "` + awsImg + `"}`},
		}
		e.must(e.c.Create(e.ctx, cm))
		c = e.waitCondition(metav1.ConditionFalse, deployer.ReasonImagesInvalid)
		if !strings.Contains(c.Message, "machineAPIOperator") {
			t.Errorf("condition message %q does not name the missing image", c.Message)
		}
		e.waitEvent(corev1.EventTypeWarning, deployer.ReasonImagesInvalid, "machineAPIOperator")
		e.consistentlyNoDeployment(time.Second)

		// Once it is there, the controllers are deployed, without a
		// restart or a timer.
		cm.Data[deployer.ImagesKey] = imagesJSON(maoImg1, proxyImg1)
		e.must(e.c.Update(e.ctx, cm))
		e.waitDeployment(func(d *appsv1.Deployment) bool { return image(d, "machineset-controller") == maoImg1 })
		e.waitCondition(metav1.ConditionTrue, deployer.ReasonApplied)
	})
}

type env struct {
	t   *testing.T
	ctx context.Context
	c   client.Client
	ns  string
	// name is the Deployment's, after the deployer's cloud.
	name string
}

var nsCount int

// start creates a namespace and runs the deployer's manager on it until
// the test ends.
func start(t *testing.T, cfg *rest.Config, opts ...func(*deployer.Options)) *env {
	t.Helper()
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	nsCount++
	ns := fmt.Sprintf("mapi-%d", nsCount)
	ctx := context.Background()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	// a controller name of its own, for its own reconcile metrics
	// Its own identity: these control planes serve no Infrastructure
	// (clusterid_test.go has one that does).
	o := deployer.Options{Namespace: ns, ProviderImage: providerImg, Name: "deployer-" + ns, ClusterID: testClusterID}
	for _, f := range opts {
		f(&o)
	}
	mgr, err := deployer.NewManager(cfg, deployer.ManagerOptions{
		Options:                o,
		MetricsBindAddress:     "0",
		HealthProbeBindAddress: "0",
		AllowManyPerProcess:    true,
		Log:                    log.Log,
	})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Run(t, mgr)
	return &env{t: t, ctx: ctx, c: c, ns: ns, name: deployer.DeploymentName(o.Cloud)}
}

// reconciles is how often the controller has reconciled, from
// controller-runtime's metrics.
func (e *env) reconciles() float64 {
	e.t.Helper()
	return testenv.Counter(e.t, "controller_runtime_reconcile_total", map[string]string{"controller": "deployer-" + e.ns})
}

func (e *env) must(err error) {
	e.t.Helper()
	if err != nil {
		e.t.Fatal(err)
	}
}

func imagesJSON(mao, proxy string) string {
	return fmt.Sprintf(`{
  "machineAPIOperator": %q,
  "kubeRBACProxy": %q,
  "clusterAPIControllerAWS": %q
}`, mao, proxy, awsImg)
}

func (e *env) createImages(mao, proxy string) {
	e.t.Helper()
	e.must(e.c.Create(e.ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: deployer.ImagesConfigMap, Namespace: e.ns},
		Data:       map[string]string{deployer.ImagesKey: imagesJSON(mao, proxy)},
	}))
}

func (e *env) getDeployment() *appsv1.Deployment {
	e.t.Helper()
	d := &appsv1.Deployment{}
	e.must(e.c.Get(e.ctx, types.NamespacedName{Namespace: e.ns, Name: e.name}, d))
	return d
}

// poll calls f until it returns true or the timeout passes.
func (e *env) poll(what string, f func() (bool, string)) {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, state := f()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out waiting for %s; last: %s", what, state)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (e *env) waitDeployment(ok func(*appsv1.Deployment) bool) *appsv1.Deployment {
	e.t.Helper()
	var got *appsv1.Deployment
	e.poll("our Deployment", func() (bool, string) {
		d := &appsv1.Deployment{}
		err := e.c.Get(e.ctx, types.NamespacedName{Namespace: e.ns, Name: e.name}, d)
		if err != nil {
			return false, err.Error()
		}
		got = d
		return ok(d), fmt.Sprintf("containers %v", d.Spec.Template.Spec.Containers)
	})
	return got
}

func (e *env) waitNoDeployment() {
	e.t.Helper()
	e.poll("our Deployment to go", func() (bool, string) {
		err := e.c.Get(e.ctx, types.NamespacedName{Namespace: e.ns, Name: e.name}, &appsv1.Deployment{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
}

func (e *env) consistentlyNoDeployment(d time.Duration) {
	e.t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		err := e.c.Get(e.ctx, types.NamespacedName{Namespace: e.ns, Name: e.name}, &appsv1.Deployment{})
		if !apierrors.IsNotFound(err) {
			e.t.Fatalf("our Deployment exists (get: %v), want none", err)
		}
	}
}

func (e *env) statusConfigMap() *corev1.ConfigMap {
	e.t.Helper()
	cm := &corev1.ConfigMap{}
	e.must(e.c.Get(e.ctx, types.NamespacedName{Namespace: e.ns, Name: deployer.StatusConfigMap}, cm))
	return cm
}

func (e *env) waitCondition(status metav1.ConditionStatus, reason string) metav1.Condition {
	e.t.Helper()
	var got metav1.Condition
	e.poll(fmt.Sprintf("condition %s=%s/%s", deployer.ConditionDeployed, status, reason), func() (bool, string) {
		conds, err := deployer.ReadConditions(e.ctx, e.c, e.ns)
		if err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(conds, deployer.ConditionDeployed)
		if c == nil {
			return false, "no condition"
		}
		got = *c
		return c.Status == status && c.Reason == reason, fmt.Sprintf("%+v", *c)
	})
	return got
}

func (e *env) events(reason string) []corev1.Event {
	e.t.Helper()
	list := &corev1.EventList{}
	e.must(e.c.List(e.ctx, list, client.InNamespace(e.ns)))
	var out []corev1.Event
	for _, ev := range list.Items {
		if ev.InvolvedObject.Kind == "ConfigMap" && ev.InvolvedObject.Name == deployer.StatusConfigMap && ev.Reason == reason {
			out = append(out, ev)
		}
	}
	return out
}

// eventCount counts the events of reason on the status ConfigMap, repeats
// folded into one Event included.
func (e *env) eventCount(reason string) int {
	e.t.Helper()
	n := 0
	for _, ev := range e.events(reason) {
		n += int(max(ev.Count, 1))
	}
	return n
}

func (e *env) waitEvent(eventType, reason, contains string) {
	e.t.Helper()
	e.poll(fmt.Sprintf("%s event %s mentioning %s", eventType, reason, contains), func() (bool, string) {
		evs := e.events(reason)
		for _, ev := range evs {
			if ev.Type == eventType && strings.Contains(ev.Message, contains) {
				// `oc describe` matches events by UID too
				if uid := e.statusConfigMap().UID; ev.InvolvedObject.UID != uid {
					e.t.Errorf("event %s refers to UID %q, the status ConfigMap has %q", reason, ev.InvolvedObject.UID, uid)
				}
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d %s events", len(evs), reason)
	})
}

// operatorDeployment stands in for the machine-api-operator's own
// Deployment on a supported platform.
func operatorDeployment(ns string) *appsv1.Deployment {
	l := map[string]string{"api": "clusterapi", "k8s-app": "controller"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{
			Name: deployer.OperatorDeploymentName, Namespace: ns, Labels: l,
			Annotations: map[string]string{"machine.openshift.io/owned": ""},
		},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: l},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: l},
				Spec: corev1.PodSpec{Containers: []corev1.Container{
					{Name: "machine-controller", Image: "operator-image"},
				}},
			},
		},
	}
}

func names(cs []corev1.Container) []string {
	var n []string
	for _, c := range cs {
		n = append(n, c.Name)
	}
	return n
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func image(d *appsv1.Deployment, container string) string {
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == container {
			return c.Image
		}
	}
	return ""
}

func setImage(d *appsv1.Deployment, container, img string) {
	for i := range d.Spec.Template.Spec.Containers {
		if d.Spec.Template.Spec.Containers[i].Name == container {
			d.Spec.Template.Spec.Containers[i].Image = img
		}
	}
}

func ownsField(d *appsv1.Deployment, field string) bool {
	for _, mf := range d.ManagedFields {
		if mf.Manager == deployer.ManagedByValue && mf.Operation == metav1.ManagedFieldsOperationApply &&
			mf.FieldsV1 != nil && strings.Contains(string(mf.FieldsV1.Raw), `"`+field+`"`) {
			return true
		}
	}
	return false
}

func retryConflict(f func() error) error {
	var err error
	for range 10 {
		if err = f(); !apierrors.IsConflict(err) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
	return err
}
