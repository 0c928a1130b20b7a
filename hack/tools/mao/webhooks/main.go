// Command webhooks prints the Machine and MachineSet admission webhook
// configurations the machine-api-operator of this module's era installs on
// a cluster (its pkg/operator applies exactly these), as a JSON v1 List:
// `make matrix` registers them on its control plane, so that Machine writes
// go through the era's webhooks as on a cluster of that release.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	mapiwebhooks "github.com/openshift/machine-api-operator/pkg/webhooks"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
)

func main() {
	validating := mapiwebhooks.NewMachineValidatingWebhookConfiguration()
	validating.SetGroupVersionKind(admissionregistrationv1.SchemeGroupVersion.WithKind("ValidatingWebhookConfiguration"))
	mutating := mapiwebhooks.NewMachineMutatingWebhookConfiguration()
	mutating.SetGroupVersionKind(admissionregistrationv1.SchemeGroupVersion.WithKind("MutatingWebhookConfiguration"))
	list := map[string]any{"apiVersion": "v1", "kind": "List", "items": []any{validating, mutating}}
	out, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(string(out))
}
