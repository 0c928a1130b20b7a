package demo

import (
	"context"
	"errors"
)

// The provider and the machine-api controllers run as one unit that can be
// stopped and started again while the cluster and the cloud go on, as on a
// cluster the controllers' Deployment is scaled to zero and back, or the
// provider uninstalled and installed again (`machine-api-provider
// uninstall`, test/adopt).

// machineAPIRun is one run of the provider and the controllers.
type machineAPIRun struct {
	cancel context.CancelFunc
	waits  []func()
}

// StartMachineAPI starts the provider's manager (the machine controller,
// the capacity publisher, the janitor) and the machine-api-operator's
// MachineSet, nodelink and MachineHealthCheck controllers. Start does; after
// StopMachineAPI it starts them anew.
func (e *Env) StartMachineAPI() error {
	if e.machineAPI != nil {
		return errors.New("the machine API runs already")
	}
	ctx, cancel := context.WithCancel(e.ctx)
	run := &machineAPIRun{cancel: cancel}
	e.machineAPI = run
	// A cluster that runs another provider first (Options.WithoutProvider)
	// gets the provider from StartProvider.
	if !e.Options.WithoutProvider {
		mgr, err := e.newProvider(false)
		if err != nil {
			e.StopMachineAPI()
			return err
		}
		run.waits = append(run.waits, goRun(ctx, mgr.Start))
	}
	if err := e.startMachineAPIControllers(ctx, e.Cluster.Config, e.Options.Log); err != nil {
		e.StopMachineAPI()
		return err
	}
	return nil
}

// StopMachineAPI stops the provider and the controllers and returns once
// every one of them has returned: nothing of theirs acts any more.
func (e *Env) StopMachineAPI() {
	run := e.machineAPI
	if run == nil {
		return
	}
	run.cancel()
	for _, wait := range run.waits {
		wait()
	}
	e.machineAPI = nil
}

// MachineAPIRunning says whether the provider and the controllers run.
func (e *Env) MachineAPIRunning() bool { return e.machineAPI != nil }
