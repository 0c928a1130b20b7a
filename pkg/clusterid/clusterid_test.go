package clusterid_test

import (
	"slices"
	"strings"
	"testing"

	configv1 "github.com/openshift/api/config/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/appuio/machine-api-provider/pkg/clusterid"
)

func TestParseLegacy(t *testing.T) {
	for value, want := range map[string][]string{
		"":                            nil,
		"c-green-1234":                {"c-green-1234"},
		" c-green-1234 , c-blue-5678": {"c-blue-5678", "c-green-1234"},
		"c-green-1234,,":              {"c-green-1234"},
	} {
		got, err := clusterid.ParseLegacy(value, "c-green-1234-x7k2p")
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("%q: %v, %v; want %v", value, got, err, want)
		}
	}
	for value, says := range map[string]string{
		"c-green-1234-x7k2p":        "the cluster's own ID",
		"c-green-1234,c-green-1234": "named twice",
		"c green":                   "legacy cluster ID \"c green\"",
		"a,b,c,d,e,f,g,h,i":         "at most 8",
	} {
		if _, err := clusterid.ParseLegacy(value, "c-green-1234-x7k2p"); err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("%q: %v, want an error saying %q", value, err, says)
		}
	}
}

func TestIDs(t *testing.T) {
	infra := &configv1.Infrastructure{ObjectMeta: metav1.ObjectMeta{Name: "cluster", Annotations: map[string]string{clusterid.LegacyAnnotation: "c-green-1234"}}}
	infra.Status.InfrastructureName = "c-green-1234-x7k2p"
	ids, err := clusterid.FromInfrastructure(infra)
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]bool{"c-green-1234-x7k2p": true, "c-green-1234": true, "c-blue-5678": false, "": false} {
		if ids.Owns(id) != want {
			t.Errorf("Owns(%q) = %v, want %v", id, !want, want)
		}
	}
	if ids.IsLegacy("c-green-1234-x7k2p") || !ids.IsLegacy("c-green-1234") {
		t.Error("IsLegacy: only the declared ID is legacy")
	}
	if got := ids.DeclareCommand("c-blue-5678"); got != "oc annotate --overwrite infrastructure.config.openshift.io cluster machine.appuio.io/legacy-cluster-ids=c-blue-5678,c-green-1234" {
		t.Errorf("DeclareCommand keeps what is declared: %s", got)
	}
	infra.Annotations[clusterid.LegacyAnnotation] = "c-green-1234-x7k2p"
	if _, err := clusterid.FromInfrastructure(infra); err == nil || !strings.Contains(err.Error(), "oc edit infrastructure.config.openshift.io cluster") {
		t.Errorf("an annotation naming the own ID: %v, want an error saying how to fix it", err)
	}
}
