// Package actuator implements the machine-api-operator's Actuator for any
// cloud behind pkg/cloud: it turns a Machine into a server and back, and
// reports the server on the Machine the way the rest of OpenShift (the
// nodelink controller, cluster-machine-approver, the autoscaler) expects.
//
// Nothing here knows a particular cloud.
package actuator
