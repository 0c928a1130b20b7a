package actuator_test

import (
	"context"
	"testing"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	toolscache "k8s.io/client-go/tools/cache"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/appuio/machine-api-provider/pkg/manager"
	"github.com/appuio/machine-api-provider/test/fixture"
)

// watchMachines calls see with every version of every Machine the API server
// shows, from a cache of the test's own: a test can see the states a Machine
// passed through between two of its reads. It returns once the cache has
// synced; the watch ends with the test.
func watchMachines(t *testing.T, e *fixture.Env, see func(*machinev1.Machine)) {
	t.Helper()
	scheme, err := manager.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	c, err := ctrlcache.New(e.Config, ctrlcache.Options{Scheme: scheme, DefaultNamespaces: map[string]ctrlcache.Config{fixture.Namespace: {}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	inf, err := c.GetInformer(ctx, &machinev1.Machine{})
	if err != nil {
		t.Fatal(err)
	}
	note := func(obj any) {
		if m, ok := obj.(*machinev1.Machine); ok {
			see(m)
		}
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: note, UpdateFunc: func(_, obj any) { note(obj) }}); err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		t.Fatal("the test's Machine cache never synced")
	}
}
