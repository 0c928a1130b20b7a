// Package exoscale holds the provider's integration tests on Exoscale: a
// real kube-apiserver, the real machine controller driving the provider's
// actuator, the real egoscale SDK talking HTTP to the Exoscale emulator
// (test/fixture with Cloud: Exoscale).
package exoscale
