package main

import (
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/pkg/adopt"
)

// restConfig loads the kubeconfig at path, or else, as kubectl does, the
// in-cluster config, $KUBECONFIG or ~/.kube/config.
func restConfig(path string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	return cfg, nil
}

// adoptClient is a client of the cluster at the kubeconfig path with every
// kind adopt, uninstall and adopt --undo read and write (adopt.Scheme).
func adoptClient(path string) (client.Client, error) {
	cfg, err := restConfig(path)
	if err != nil {
		return nil, err
	}
	scheme, err := adopt.Scheme()
	if err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: scheme})
}
