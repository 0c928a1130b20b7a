package cloud

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

// ErrNotFound is wrapped by errors about things the cloud does not have.
var ErrNotFound = errors.New("not found")

// InvalidConfigError is the cloud refusing a request because of what the
// provider spec says: retrying cannot help, the spec must change.
type InvalidConfigError struct {
	// Field is the provider spec field at fault, as in the spec's JSON
	// ("flavor", "interfaces[0].networkUUID"); "" when the cloud did not say.
	Field string
	// Message is the cloud's explanation.
	Message string
}

func (e *InvalidConfigError) Error() string {
	if e.Field == "" {
		return e.Message
	}
	return fmt.Sprintf("%s: %s", e.Field, e.Message)
}

// IncompleteError is a server the cloud made whose completion it refused
// for good: a step after the create that makes it what the spec asks (an
// Exoscale instance's attach to a private network or a security group) was
// refused for what the spec says, and no retry can complete it. SyncServer
// returns it; the actuator deletes such a server of a Machine that never
// got a Node and fails the Machine, naming the field (Err).
type IncompleteError struct {
	Err *InvalidConfigError
}

func (e *IncompleteError) Error() string { return e.Err.Error() }
func (e *IncompleteError) Unwrap() error { return e.Err }

// RetryableError is a failure that goes away by itself: rate limiting,
// server errors, timeouts. RetryAfter is the cloud's hint, 0 without one.
type RetryableError struct {
	RetryAfter time.Duration
	Err        error
	// NotPerformed is true when the request certainly had no effect: the
	// cloud turned it away before acting (429) or it was never sent (the
	// account's gate held it back, the connection could not be made). A
	// write failing otherwise may or may not have happened.
	NotPerformed bool
}

func (e *RetryableError) Error() string { return e.Err.Error() }
func (e *RetryableError) Unwrap() error { return e.Err }

// AuthError is the cloud refusing the credentials themselves: a 401, or a
// 403 in which the cloud says the key or its signature is invalid. Nothing
// made with them can succeed, so it closes the account's gate (gate.go). It
// is not an InvalidConfigError: fixing the secret fixes the Machine,
// without a new spec.
type AuthError struct {
	Cloud  string
	Op     string
	Status int
	// Source says where the credentials came from (a secret and its keys,
	// or the manager's environment), never what they are.
	Source string
	Detail string
	// RetryAfter is how long the account's gate holds its calls back
	// after this refusal (Call sets it).
	RetryAfter time.Duration
}

func (e *AuthError) Error() string {
	msg := fmt.Sprintf("%s %s: HTTP %d: the credentials from %s were refused", e.Cloud, e.Op, e.Status, e.Source)
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

// PermissionError is the cloud refusing one operation to credentials it
// accepts (a 403 that is not about the key itself): a read-only token, an
// IAM role that lacks the operation. Every other operation may still
// succeed, so it holds back this operation only (Gate.AdmitOp), and it
// says which permission to grant.
type PermissionError struct {
	Cloud string
	// Op is the provider's name of the call ("instance.delete").
	Op     string
	Status int
	// Source says where the credentials came from, never what they are.
	Source string
	// Permission names what to grant, in the cloud's terms and short (an
	// IAM operation, a token's scope: a metric's label); "" when the
	// cloud's client cannot tell. Grant says how, for people.
	Permission string
	Grant      string
	Detail     string
	// Zone is the zone whose endpoint refused the operation, "" for the
	// account's endpoint; AllowedIn are the zones that allowed the same
	// operation to the same credentials lately (Gate.ObserveOpIn sets
	// both): then the permission is there, and what refuses it is
	// confined to Zone.
	Zone      string
	AllowedIn []string
	// RetryAfter is how long the account's gate holds this operation back
	// after this refusal (Call sets it).
	RetryAfter time.Duration
}

func (e *PermissionError) Error() string {
	msg := fmt.Sprintf("%s %s: HTTP %d: the credentials from %s may not do this", e.Cloud, e.Op, e.Status, e.Source)
	if e.Zone != "" {
		msg += " in zone " + e.Zone
	}
	switch {
	case len(e.AllowedIn) > 0:
		// Granting what they have would not help: say where it is
		// refused, and that elsewhere it is not.
		zones := "zone "
		if len(e.AllowedIn) > 1 {
			zones = "zones "
		}
		msg += fmt.Sprintf(" (they may in %s%s: a rule of their role's or the organization's policy leaves zone %s out; allow %s there)",
			zones, strings.Join(e.AllowedIn, ", "), e.Zone, orOperation(e.Permission))
	case e.Grant != "" && e.Zone != "":
		msg += ": grant them " + e.Grant + " in zone " + e.Zone
	case e.Grant != "":
		msg += ": grant them " + e.Grant
	case e.Permission != "":
		msg += ": grant them " + e.Permission
	}
	if e.Detail != "" {
		msg += " (" + e.Detail + ")"
	}
	return msg
}

func orOperation(permission string) string {
	if permission == "" {
		return "the operation"
	}
	return fmt.Sprintf("%q", permission)
}

// IsNotFound reports whether err says the thing is not there.
func IsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }

// NotPerformed reports whether a failed call certainly changed nothing in
// the cloud: it was refused for what it asked (invalid, not found, not
// allowed), rate limited, or never sent. Any other failure of a write, a
// timeout or a 5xx above all, may have happened after all.
func NotPerformed(err error) bool {
	var (
		inv  *InvalidConfigError
		auth *AuthError
		perm *PermissionError
		re   *RetryableError
	)
	switch {
	case err == nil:
		return false
	case errors.As(err, &re):
		return re.NotPerformed
	case errors.As(err, &inv), errors.As(err, &auth), errors.As(err, &perm), IsNotFound(err):
		return true
	}
	return false
}

// ZoneError is a failure confined to one zone of a cloud whose API answers
// per zone (Exoscale's instances live in their zone's endpoint): the zone's
// endpoint failed (5xx, a timeout, a refusal), the rest of the account did
// not. It degrades the Machines of that zone only: the account's gate does
// not close for it (Gate.Observe), and a list of a cluster's servers that
// other zones answered is still an answer for their Machines.
//
// A failure is only taken for the zone's outage (ZoneOutage) when other
// zones answered the same credentials lately (Confined): a failure of
// every zone asked says nothing about any one of them (the credentials,
// the network, the whole cloud), and is reported as the cloud's.
type ZoneError struct {
	Zone string
	Err  error
	// Confined says that other zones answered the same credentials
	// lately: the failure is this zone's.
	Confined bool
}

func (e *ZoneError) Error() string { return fmt.Sprintf("zone %s: %v", e.Zone, e.Err) }
func (e *ZoneError) Unwrap() error { return e.Err }

// PartialListError is a list of a cluster's servers that some zones did not
// answer. The list comes with it, holding the servers of the zones that
// answered; Failed says which did not, and why.
type PartialListError struct {
	Failed []*ZoneError
}

func (e *PartialListError) Error() string {
	parts := make([]string, len(e.Failed))
	for i, f := range e.Failed {
		parts[i] = f.Error()
	}
	return "the servers of some zones could not be listed: " + strings.Join(parts, "; ")
}

// Unwrap lets errors.As find what the zones failed with (a RetryableError,
// an AuthError).
func (e *PartialListError) Unwrap() []error {
	out := make([]error, len(e.Failed))
	for i, f := range e.Failed {
		out[i] = f
	}
	return out
}

// Zones names the zones that did not answer, sorted.
func (e *PartialListError) Zones() []string {
	out := make([]string, 0, len(e.Failed))
	for _, f := range e.Failed {
		out = append(out, f.Zone)
	}
	sort.Strings(out)
	return out
}

// Has reports whether zone is one of the zones that did not answer.
func (e *PartialListError) Has(zone string) bool {
	for _, f := range e.Failed {
		if f.Zone == zone {
			return true
		}
	}
	return false
}

// ZoneOutage names the zone whose outage a failure is: a ZoneError of a
// zone that failed while others answered the same credentials (Confined);
// "" for any other failure, one of every zone asked included.
func ZoneOutage(err error) string {
	var ze *ZoneError
	if errors.As(err, &ze) && ze.Confined {
		return ze.Zone
	}
	return ""
}

// ZoneOf names the zone whose endpoint a failure came from, "" when it is
// none's (ZoneOutage says whether it is that zone's outage).
func ZoneOf(err error) string {
	var ze *ZoneError
	if errors.As(err, &ze) {
		return ze.Zone
	}
	return ""
}
