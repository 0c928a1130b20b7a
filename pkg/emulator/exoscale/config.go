package exoscale

import (
	"net/http"
	"time"

	"github.com/appuio/machine-api-provider/pkg/emulator/harness"
)

// Config configures an Emulator. The zero value is a working emulator with
// DefaultAccount, the RHCOS templates of DefaultTemplates, instances that
// boot at once and operations that are done when answered.
type Config struct {
	// Accounts are the organizations of the emulated cloud, each with its
	// own API key and secret and its own resources. Empty: DefaultAccount.
	Accounts []Account

	// BootTime is how long a created, started or rebooted instance is
	// "starting" before it is "running"; ActionTime is how long stop
	// ("stopping") and delete ("destroying") take, by default BootTime.
	// 0 makes the change immediate.
	BootTime   time.Duration
	ActionTime time.Duration

	// OperationTime is the least time an operation stays "pending". An
	// operation is done when its change is (an instance created with
	// auto-start is running), and not before OperationTime has passed. 0
	// answers operations whose change is immediate already "success";
	// DefaultOperationTime is what the emulator command uses.
	OperationTime time.Duration

	// StateFile, when set, is loaded at start and rewritten atomically after
	// every change, so the emulated world survives a restart.
	StateFile string

	// ImageClient downloads the files of template registrations; nil is a
	// plain client with a 30-minute timeout. A client whose transport is
	// an imagefetch.Mirror registers without a network.
	ImageClient *http.Client

	// Templates are private templates present from the start, as if
	// registered earlier (a new world only: a loaded state file keeps its
	// own). nil: DefaultTemplates; an empty slice: none.
	Templates []TemplateSeed

	// Faults are the harness's fault-injection rules in force at start
	// (errors, latency and lost responses per route); Seed makes their dice
	// and those of OperationFailures reproducible.
	Faults []harness.Rule
	Seed   int64

	// NoWriteAudit leaves the write audit out (harness.Options): the
	// benchmarks, whose accounts it would slow as they grow.
	NoWriteAudit bool

	// OperationFailures make operations end in "failure" instead of
	// "success" (the cloud accepted the request and then could not do it).
	OperationFailures []OperationFailure

	// Clock replaces time.Now for the emulated world, so tests can drive
	// the asynchronous life cycle without sleeping. Request signatures
	// expire by the wall clock, as the clients sign by theirs.
	Clock func() time.Time
}

// DefaultOperationTime is how long operations stay pending in the emulator
// command: short, but long enough that clients must follow them.
const DefaultOperationTime = time.Second

// Account is one organization of the emulated cloud.
type Account struct {
	// Name identifies the account in the state file and in introspection.
	Name string
	// Key ("EXO" and 24 hexadecimal digits on the real cloud) and Secret
	// sign the account's requests.
	Key, Secret string
	// Quotas override DefaultQuotas by resource ("instance", "gpu",
	// "private-network", "template"); -1 is unlimited. An account whose
	// "gpu" quota is 0 is not authorized to run GPU instance types.
	Quotas map[string]int64
	// DeployTargets are the dedicated hypervisors (or edge sites) the
	// account may place instances on.
	DeployTargets []DeployTargetSeed
	// Policy is the IAM role policy of the account's key (iam.go); nil
	// allows everything.
	Policy *Policy
}

// The default account: what the demo and the emulator command use when no
// account is configured. Key and secret have the real formats (a secret is
// 43 characters of base64url); neither is a secret. They share no word with
// the emulator's messages: the provider withholds a message that quotes 8
// bytes of the credentials in use.
const (
	DefaultAccountName = "emulator"
	DefaultAPIKey      = "EXO0123456789abcdef01234567"
	DefaultAPISecret   = "pQ3vN8xLr2TzW6kYs9HcJ4mBd7FgR1aUe5VoK0nXhEi"
)

// DefaultAccount is the account of a Config without accounts.
var DefaultAccount = Account{Name: DefaultAccountName, Key: DefaultAPIKey, Secret: DefaultAPISecret}

// DefaultQuotas are the limits of an account for the resources it does not
// override. Exoscale raises them on request; so does Account.Quotas.
var DefaultQuotas = map[string]int64{
	"instance":        20,
	"gpu":             4,
	"private-network": 10,
	"template":        10,
	"elastic-ip":      5,
	"snapshot":        20,
}

// TemplateSeed describes a private template present from the start.
type TemplateSeed struct {
	// Account owning it (its Name); "" is the first account.
	Account string
	Name    string
	// Zones it is registered in, one template (and ID) per zone; empty is
	// every zone.
	Zones       []string
	Description string
	// DefaultUser, BootMode ("legacy" or "uefi", default "legacy") and
	// SizeGiB (the smallest disk it fits, default 16).
	DefaultUser string
	BootMode    string
	SizeGiB     int64
}

// DefaultTemplates are seeded when Config.Templates is nil: RHCOS as an
// OpenShift installation on Exoscale registers it, in every zone.
var DefaultTemplates = []TemplateSeed{
	{Name: "rhcos-4.19", Description: "Red Hat Enterprise Linux CoreOS 4.19", DefaultUser: "core", BootMode: "uefi", SizeGiB: 16},
}

// DeployTargetSeed describes a deploy target of an account.
type DeployTargetSeed struct {
	Zone string
	Name string
	// Type is "dedicated" (default) or "edge".
	Type        string
	Description string
}

// OperationFailure makes operations fail: the request is answered (and its
// change may already be visible), but the operation ends in "failure" and
// the change is undone. A failed instance creation leaves no instance.
type OperationFailure struct {
	// Command is the operation's command, as in its reference and in the
	// vendor's document ("create-instance", "stop-instance"); "*" is any.
	Command string `json:"command"`
	// Rate is the probability (0..1] that an operation of Command fails.
	Rate float64 `json:"rate"`
	// Times limits how often the rule fires; 0 means without limit.
	Times int `json:"times,omitempty"`
	// Reason is the operation's reason (default "unavailable"); Message
	// its message (default a sentence naming the emulator).
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// Fired counts how often the rule has fired (read-only).
	Fired int `json:"fired"`
}
