package uninstall

import (
	"context"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Clouds are the clouds the provider serves, as --cloud names them.
var Clouds = []string{"cloudscale", "exoscale"}

// defaultCloud is the deployer's (and the manager's) cloud when its
// arguments name none: config/overlays/cloudscale passes no --cloud.
const defaultCloud = "cloudscale"

// CloudOf says which cloud the provider installed in namespace serves: the
// --cloud of its deployer (cloudscale when it passes none), else the one
// cloud whose controllers' Deployment is there. uninstall and adopt --undo
// act on that cloud's Machines and objects: with the wrong one they would
// release no Machine, yet stop and delete what both overlays share,
// leaving the other cloud's controllers running without their deployer.
// found is false when nothing tells (no deployer, and no or both
// controllers' Deployments).
func CloudOf(ctx context.Context, c client.Reader, namespace string) (cloud string, found bool, err error) {
	var d appsv1.Deployment
	err = c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: DeployerName}, &d)
	if err == nil {
		return deployerCloud(&d), true, nil
	}
	if !apierrors.IsNotFound(err) {
		return "", false, err
	}
	var running []string
	for _, cl := range Clouds {
		err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ControllersName(cl)}, &appsv1.Deployment{})
		switch {
		case err == nil:
			running = append(running, cl)
		case !apierrors.IsNotFound(err):
			return "", false, err
		}
	}
	if len(running) == 1 {
		return running[0], true, nil
	}
	return "", false, nil
}

// deployerCloud is the --cloud of the deployer's container.
func deployerCloud(d *appsv1.Deployment) string {
	for _, c := range d.Spec.Template.Spec.Containers {
		args := append(slices.Clone(c.Command), c.Args...)
		for i, a := range args {
			if v, ok := strings.CutPrefix(a, "--cloud="); ok {
				return v
			}
			if a == "--cloud" && i+1 < len(args) {
				return args[i+1]
			}
		}
	}
	return defaultCloud
}

// ResolveCloud is the cloud uninstall and adopt --undo act on: the one the
// installed provider serves (CloudOf) when given is "", else given, which
// must then agree with it.
func ResolveCloud(ctx context.Context, c client.Reader, namespace, given string) (string, error) {
	if given != "" && !slices.Contains(Clouds, given) {
		return "", fmt.Errorf("--cloud %q: the clouds are %s", given, strings.Join(Clouds, " and "))
	}
	installed, found, err := CloudOf(ctx, c, namespace)
	if err != nil {
		return "", fmt.Errorf("reading which cloud the provider in %s serves: %w", namespace, err)
	}
	switch {
	case found && given != "" && given != installed:
		return "", fmt.Errorf("the provider in %s serves %s (its %s), not %s: run it with --cloud %s, or without --cloud",
			namespace, installed, DeployerName, given, installed)
	case found:
		return installed, nil
	case given != "":
		return given, nil
	}
	return "", fmt.Errorf("cannot tell which cloud the provider in %s serves (no %s, and not exactly one of %s and %s): name it with --cloud",
		namespace, DeployerName, ControllersName(Clouds[0]), ControllersName(Clouds[1]))
}
