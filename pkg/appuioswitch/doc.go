// Package appuioswitch moves a cloudscale.ch cluster from appuio's
// provider (github.com/appuio/machine-api-provider-cloudscale, v0.4.0,
// deployed by its Commodore component component-machine-api-provider-
// cloudscale, v0.3.1) to this one, and back, touching no server: the
// Machines, their servers and Nodes stay; what changes is who acts on them.
//
// Facts of appuio's provider it relies on, read from its code (cited by
// file, tag v0.4.0 unless said otherwise):
//
//   - Its component runs the Deployment appuio-machine-api-provider-
//     cloudscale (component/main.jsonnet, v0.3.1): the machine controller
//     (--target manager, main.go, lease 3a21cedd.appuio.io, not released
//     when it stops) and a manager (--target machine-api-controllers-manager,
//     lease 458f6dca.appuio.io, released when it stops) that applies the
//     machine-api-operator's controllers as the Deployment
//     appuio-machine-api-controllers, owned by the ConfigMap
//     machine-api-operator-images, and applies it again whenever it goes
//     (controllers/machine_api_controllers_controller.go). The owner keeps
//     that Deployment when the component goes.
//   - The component also renders the Secrets its parameters name
//     (parameters.machine_api_provider_cloudscale.secrets; usually
//     cloudscale-rw-token and cloudscale-user-data, tests/defaults.yml),
//     labelled app.kubernetes.io/instance=machine-api-provider-cloudscale,
//     which removing the component deletes; every Machine names them.
//   - Servers carry the tags machine-api-provider-cloudscale_appuio_io_name
//     (the Machine) and ..._cluster_id (the Machine's
//     machine.openshift.io/cluster-api-cluster label), which this provider
//     uses too (api/cloudscale/v1beta1/tags.go); its anti-affinity server
//     groups carry only ..._antiAffinityKey (pkg/machine/actuator.go).
//
// The switch is three commands of `machine-api-provider switch-from-appuio`
// around removing the component (docs/switch-from-appuio.md): --prepare
// saves copies of those Secrets; --apply, once the component is gone,
// checks that appuio's machine controller no longer renews its lease and
// that every Machine's server is found, brings back the Secrets, hands
// appuio's server groups of the cluster over (adds the cluster's tag),
// deletes appuio-machine-api-controllers (which nothing applies again now)
// and waits for its pods to go, and releases the old controllers' leases.
// Only then does this provider's deployer
// deploy its controllers: it stands back while either of appuio's
// Deployments exists. --rollback, once this provider is removed, releases
// its leases and leaves every server, group and Secret as appuio's
// provider finds them. Each step is recorded in the ConfigMap
// RecordConfigMap; running a command again does only what is left.
//
// Nothing here creates, deletes, stops or reboots a server. Before any
// change, every Machine in appuio's spec format must parse as this
// provider's spec (else it would fail it) and have exactly one server by
// the provider's own lookup (else it would make a second), and the
// Machines' cluster ID must be one the cluster owns: on fleet clusters it
// is the Terraform module's cluster_id, declared once as a legacy cluster
// ID (identity.go, pkg/clusterid).
package appuioswitch
