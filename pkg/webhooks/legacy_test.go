package webhooks_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/pkg/actuator"
	"github.com/appuio/machine-api-provider/pkg/clusterid"
)

// A fleet cluster's Machines and MachineSets carry the Terraform module's
// cluster_id, the Project Syn ID, not the infrastructureName: refused
// until an admin declares it on the Infrastructure (the refusal says how),
// admitted from then on, without restarting the webhooks. An Argo CD sync
// of the MachineSets then goes through.
func TestDeclaredLegacyClusterIDIsAdmitted(t *testing.T) {
	e := startWebhooks(t)
	ctx := context.Background()
	const syn = "c1"
	labels := func() map[string]string { return map[string]string{actuator.ClusterIDLabel: syn} }
	for _, k := range kinds {
		err := e.c.Create(ctx, k.object("fleet-"+strings.ToLower(k.kind), validSpec(), labels()), client.DryRunAll)
		refused(t, err, k.webhook, k.labelsPath+"[machine.openshift.io/cluster-api-cluster]",
			fmt.Sprintf(`Invalid value: "%s": names cluster "%s", and this cluster is "%s"`, syn, syn, clusterID))
		if err != nil && !strings.Contains(err.Error(), clusterid.DeclareCommand(syn)) {
			t.Errorf("%s: the refusal does not say how to declare %s:\n%v", k.kind, syn, err)
		}
	}

	// The admin declares it.
	var infra configv1.Infrastructure
	if err := e.c.Get(ctx, client.ObjectKey{Name: clusterid.InfrastructureName}, &infra); err != nil {
		t.Fatal(err)
	}
	infra.Annotations = map[string]string{clusterid.LegacyAnnotation: syn}
	if err := e.c.Update(ctx, &infra); err != nil {
		t.Fatal(err)
	}
	for _, k := range kinds {
		// A refusal read the Infrastructure less than a second ago:
		// the next request after that reads it again.
		deadline := time.Now().Add(10 * time.Second)
		for {
			err := e.c.Create(ctx, k.object("fleet-"+strings.ToLower(k.kind), validSpec(), labels()), client.DryRunAll)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s labelled with the declared legacy ID %s: still refused after 10 s: %v", k.kind, syn, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
		// Another cluster's ID stays refused.
		other := map[string]string{actuator.ClusterIDLabel: "c2-other"}
		refused(t, e.c.Create(ctx, k.object("copied-"+strings.ToLower(k.kind), validSpec(), other), client.DryRunAll), k.webhook,
			k.labelsPath+"[machine.openshift.io/cluster-api-cluster]", `Invalid value: "c2-other": names cluster "c2-other", and this cluster is "c1-x7k2p" (the Infrastructure's infrastructureName) and the declared legacy cluster ID "c1"`)
	}
}
