package appuioswitch

import (
	"github.com/appuio/machine-api-provider/pkg/controllers/deployer"
)

// Names of appuio's provider (see the package documentation for where each
// comes from).
const (
	// ManagerDeployment runs appuio's machine controller and the manager
	// that applies ControllersDeployment.
	ManagerDeployment = deployer.AppuioManagerDeployment
	// ControllersDeployment runs the machine-api-operator's controllers
	// for appuio's provider.
	ControllersDeployment = deployer.AppuioControllersDeployment
	// ManagerLease is held by appuio's machine controller; it is not
	// released when the controller stops.
	ManagerLease = "3a21cedd.appuio.io"
	// ControllersManagerLease is held by the manager that applies
	// ControllersDeployment.
	ControllersManagerLease = "458f6dca.appuio.io"
	// ComponentInstanceLabel marks what the Commodore component renders
	// (its commonLabels), which Argo CD tracks and prunes.
	ComponentInstanceLabel = "app.kubernetes.io/instance"
	ComponentInstance      = "machine-api-provider-cloudscale"
)

// The machine-api-operator's controllers' leases (its cmd/*/main.go):
// appuio's ControllersDeployment and this provider's Deployment run the
// same controllers under the same leases.
var operatorLeases = []string{
	"cluster-api-provider-machineset-leader",
	"cluster-api-provider-nodelink-leader",
	"cluster-api-provider-healthcheck-leader",
}

// What the switch writes.
const (
	// RecordConfigMap records the switch's steps, in the namespace.
	RecordConfigMap = "machine-api-provider-appuio-switch"
	// CopyPrefix names the saved copy of a Secret of appuio's component:
	// <CopyPrefix><name>.
	CopyPrefix = "appuio-switch-copy-"
	// CopyOfLabel marks a saved copy with the Secret it copies.
	CopyOfLabel = "machine.appuio.io/appuio-switch-copy-of"
)

// This provider's names.
const (
	// ourLease is the manager's (<cloud>-machine-api-provider).
	ourLease = "cloudscale-machine-api-provider"
	// deployerLease and deployerDeployment are the deployer's.
	deployerLease      = "machine-api-provider-deployer"
	deployerDeployment = "machine-api-provider-deployer"
)

// ourDeployment is the controllers Deployment the deployer applies.
var ourDeployment = deployer.DeploymentName("cloudscale")
