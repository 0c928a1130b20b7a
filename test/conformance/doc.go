// Package conformance checks the cloud emulators against test suites this
// project did not write: the official SDKs' own integration tests, which
// take the API's base URL from the environment and so run unchanged against
// an emulator.
package conformance
