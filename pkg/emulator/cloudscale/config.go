package cloudscale

import (
	"net/http"
	"time"

	"github.com/appuio/machine-api-provider/pkg/emulator/harness"
)

// Config configures an Emulator. The zero value is a working emulator that
// accepts any bearer token and boots servers instantly.
type Config struct {
	// Tokens maps API tokens to whether they may write. When empty, any
	// non-empty bearer token is accepted with write access; a request
	// without one is still refused with 401, as by the real API.
	Tokens map[string]Access

	// BootTime is how long a server stays "changing" after it is created or
	// started before it is "running"; ActionTime is the same for stop and
	// reboot. 0 makes the change immediate.
	BootTime   time.Duration
	ActionTime time.Duration
	// DeleteTime is how long a deleted server is still shown (GET and
	// lists), "changing", after its DELETE was answered: cloudscale.ch
	// documents no status of its own for a server being deleted, and its
	// own Ansible collection waits for a deleted server to be gone. Its
	// volumes, addresses and floating IPs are released at once (the
	// vendor's SDK suite deletes a server's network and volumes right after
	// the server); it stays in its server groups until it is gone. 0 makes
	// it gone at once.
	DeleteTime time.Duration

	// StateFile, when set, is loaded at start and rewritten atomically after
	// every change, so the emulated world survives a restart.
	StateFile string

	// CustomImages are present from the start, as if imported earlier.
	CustomImages []CustomImageSeed

	// ImageClient downloads the images of custom-image imports; nil is a
	// plain client with a 30-minute timeout. A client whose transport is
	// an imagefetch.Mirror imports without a network.
	ImageClient *http.Client

	// Faults are the fault-injection rules in force at start; Seed makes
	// their dice reproducible.
	Faults []harness.Rule
	Seed   int64

	// NoWriteAudit leaves the write audit out (harness.Options): the
	// benchmarks, whose accounts it would slow as they grow.
	NoWriteAudit bool

	// Clock replaces time.Now, so tests can drive the asynchronous life
	// cycle without sleeping.
	Clock func() time.Time
}

// Access is what a token may do.
type Access int

const (
	ReadWrite Access = iota
	ReadOnly
)

// CustomImageSeed describes a custom image present from the start.
type CustomImageSeed struct {
	Slug  string
	Name  string
	Zones []string
	// UserDataHandling is "pass-through" (as for Ignition) or
	// "extend-cloud-config"; default pass-through.
	UserDataHandling string
}

// DefaultCustomImages are seeded when Config.CustomImages is nil: an RHCOS
// image as an OpenShift installation on cloudscale.ch imports it.
var DefaultCustomImages = []CustomImageSeed{
	{Slug: "rhcos-4.19", Name: "RHCOS 4.19", Zones: []string{"rma1", "lpg1"}},
}
