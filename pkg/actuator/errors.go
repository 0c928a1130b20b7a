package actuator

import (
	"context"
	"errors"
	"fmt"
	"time"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	machinecontroller "github.com/openshift/machine-api-operator/pkg/controller/machine"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/appuio/machine-api-provider/pkg/cloud"
	"github.com/appuio/machine-api-provider/pkg/metrics"
	"github.com/appuio/machine-api-provider/pkg/userdata"
)

// How long to wait before trying again when a person must act: a missing
// secret may be created, unusable credentials fixed.
const (
	retryMissingSecret = 30 * time.Second
	retryCredentials   = time.Minute
	// retryAuth is the least wait after the cloud refused the credentials;
	// the account's gate may hold its calls back for longer.
	retryAuth = time.Minute
)

// invalidError is a spec the user must fix: the Machine goes Failed.
type invalidError struct{ errs field.ErrorList }

func (e *invalidError) Error() string { return e.errs.ToAggregate().Error() }

func invalidf(path *field.Path, format string, args ...any) *invalidError {
	return &invalidError{errs: field.ErrorList{field.Invalid(path, nil, fmt.Sprintf(format, args...))}}
}

// isInvalid reports whether err is a spec error, before or after fail
// turned it into the machine controller's.
func isInvalid(err error) bool {
	var inv *invalidError
	var cinv *cloud.InvalidConfigError
	var merr *machinecontroller.MachineError
	return errors.As(err, &inv) || errors.As(err, &cinv) || isNotOwned(err) ||
		(errors.As(err, &merr) && merr.Reason == machinev1.InvalidConfigurationMachineError)
}

// fail reports err on the Machine as a Warning event and turns it into what
// the machine controller acts on: a spec error fails the Machine for good,
// anything else is retried, after the cloud's hint where it gave one, after
// the Machine's own backoff otherwise, slowly where a person must act. The
// errors of this package and of pkg/cloud never carry credentials or user
// data; every message is bounded (cloud.Truncate), so no status write can
// grow past the API server's limits.
func (a *Actuator) fail(ctx context.Context, m *machinev1.Machine, reason string, err error) error {
	countFailure(m, reason, err)
	// Whichever step met a failing zone, the Machine's condition says so.
	a.zoneUnavailable(ctx, m, err)
	var (
		inv       *invalidError
		cinv      *cloud.InvalidConfigError
		foreign   *cloud.ForeignResourceError
		retryable *cloud.RetryableError
		auth      *cloud.AuthError
		perm      *cloud.PermissionError
		creds     *cloud.CredentialsError
		missing   *secretMissingError
		sandbox   *userdata.SandboxError
	)
	if ze := cloud.ZoneOutage(err); ze != "" && errors.As(err, &retryable) && !errors.As(err, &auth) {
		// One zone of the cloud fails, not the Machine: the event says
		// which (and the Machine's condition, zoneUnavailable). Refused
		// credentials are never a zone's: every zone checks the same key;
		// nor is a failure of every zone asked (ZoneOutage).
		reason = "ZoneUnavailable"
	}
	switch {
	case isNotOwned(err):
		// Never retried into a write: the server stays as it is, and the
		// error names the field that names the server (a create fails the
		// Machine with it; a lookup or a sync holds it). Whichever step
		// found it, the Machine says so now, in its condition as well as
		// an event: the machine controller retries a failed Update only
		// after 30 s (machine-api-operator, pkg/controller/machine,
		// controller.go, requeueAfter).
		return machinecontroller.InvalidMachineConfiguration("%s", a.notOwned(ctx, m, err))
	case errors.As(err, &inv):
		msg := cloud.Truncate(inv.Error())
		a.recorder.Event(m, corev1.EventTypeWarning, "InvalidConfiguration", msg)
		return machinecontroller.InvalidMachineConfiguration("%s", msg)
	case errors.As(err, &foreign):
		// Refused here, not by the cloud: nothing was written for it
		// (pkg/cloud, resources.go).
		msg := cloud.Truncate(specPath.String() + "." + foreign.Error())
		a.recorder.Event(m, corev1.EventTypeWarning, "ResourceNotOwned", msg)
		return machinecontroller.InvalidMachineConfiguration("%s", msg)
	case errors.As(err, &cinv):
		msg := cinv.Message
		if cinv.Field != "" {
			msg = specPath.String() + "." + cinv.Field + ": " + cinv.Message
		}
		msg = cloud.Truncate(fmt.Sprintf("the %s API refused the server: %s", a.cloud.Name(), msg))
		a.recorder.Event(m, corev1.EventTypeWarning, "InvalidConfiguration", msg)
		return machinecontroller.InvalidMachineConfiguration("%s", msg)
	case errors.As(err, &auth):
		after := max(retryAuth, auth.RetryAfter)
		a.backoff.failed(m.UID, a.now(), after)
		msg := cloud.Truncate(fmt.Sprintf("%v; fix the credentials, retrying in %s", err, after.Round(time.Second)))
		a.recorder.Event(m, corev1.EventTypeWarning, "CredentialsRefused", msg)
		a.log.Info("cloud refused the credentials", "machine", machineKey(m), "reason", reason, "retryAfter", after, "error", msg)
		return &machinecontroller.RequeueAfterError{RequeueAfter: after}
	case errors.As(err, &perm):
		// This operation only: the account's other calls go on (the gate
		// holds back this one), and so does the Machine once a person
		// grants the permission.
		after := max(retryAuth, perm.RetryAfter)
		a.backoff.failed(m.UID, a.now(), after)
		msg := cloud.Truncate(fmt.Sprintf("%v; retrying in %s", err, after.Round(time.Second)))
		a.recorder.Event(m, corev1.EventTypeWarning, "PermissionDenied", msg)
		a.log.Info("cloud refused an operation to the credentials", "machine", machineKey(m), "reason", reason, "operation", perm.Op, "permission", perm.Permission, "retryAfter", after, "error", msg)
		return &machinecontroller.RequeueAfterError{RequeueAfter: after}
	case errors.As(err, &creds):
		after, evReason := retryCredentials, "CredentialsInvalid"
		if creds.Missing {
			after, evReason = retryMissingSecret, "SecretNotFound"
		}
		a.recorder.Event(m, corev1.EventTypeWarning, evReason, cloud.Truncate(creds.Error()))
		return &machinecontroller.RequeueAfterError{RequeueAfter: after}
	case errors.As(err, &retryable):
		after := a.backoff.failed(m.UID, a.now(), retryable.RetryAfter)
		msg := cloud.Truncate(fmt.Sprintf("%v; retrying in %s", err, after.Round(time.Millisecond)))
		a.recorder.Event(m, corev1.EventTypeWarning, reason, msg)
		a.log.Info("transient cloud error, retrying", "machine", machineKey(m), "reason", reason, "retryAfter", after, "error", msg)
		return &machinecontroller.RequeueAfterError{RequeueAfter: after}
	case errors.As(err, &sandbox):
		// The sandbox ended without an answer: on a host starved of CPU
		// or memory a sound template does too, so it is tried again, after
		// the Machine's backoff. A template that loops or allocates without
		// end keeps failing so, and says it in every event.
		after := a.backoff.failed(m.UID, a.now(), 0)
		metrics.UserDataRenderFailed(a.cloud.Name(), sandbox.Reason())
		msg := cloud.Truncate(fmt.Sprintf("rendering %s failed: %v; retrying in %s (if it keeps failing, the template may loop or need more than the sandbox's limits: --user-data-timeout, --user-data-memory-limit)",
			specPath.Child("userDataSecret"), err, after.Round(time.Millisecond)))
		a.recorder.Event(m, corev1.EventTypeWarning, "UserDataRenderFailed", msg)
		a.log.Info("user data sandbox failed, retrying", "machine", machineKey(m), "reason", sandbox.Reason(), "retryAfter", after)
		return &machinecontroller.RequeueAfterError{RequeueAfter: after}
	case errors.As(err, &missing):
		a.recorder.Event(m, corev1.EventTypeWarning, "SecretNotFound", cloud.Truncate(missing.Error()))
		return &machinecontroller.RequeueAfterError{RequeueAfter: retryMissingSecret}
	default:
		msg := cloud.Truncate(err.Error())
		a.recorder.Event(m, corev1.EventTypeWarning, reason, msg)
		a.log.Error(errors.New(msg), "cloud call failed", "machine", machineKey(m), "reason", reason)
		return errors.New(msg)
	}
}

// withWarnings reports on the Machine what its calls left undone for want
// of a permission (cloud.Warn): a group its server's delete left behind
// because the credentials may not delete groups. Other such failures are
// retried by a later step and only logged.
func (a *Actuator) withWarnings(ctx context.Context, m *machinev1.Machine) context.Context {
	return cloud.WithWarnings(ctx, func(err error) {
		var perm *cloud.PermissionError
		if errors.As(err, &perm) {
			a.recorder.Event(m, corev1.EventTypeWarning, "PermissionDenied", cloud.Truncate(fmt.Sprintf("left undone: %v", err)))
		}
	})
}

// ConditionZone is the provider status condition that says the cloud
// cannot be asked about the Machine's server: its zone fails (the rest of
// the cloud does not, and the other Machines go on).
const ConditionZone = "ZoneAvailable"

// zoneUnavailable sets ConditionZone on a Machine whose call (a lookup, a
// create, a sync, a delete: fail asks it of every failure) failed in its
// zone only, while other zones answered the same credentials
// (cloud.ZoneOutage); record removes it once the server is seen again.
func (a *Actuator) zoneUnavailable(ctx context.Context, m *machinev1.Machine, err error) {
	zone := cloud.ZoneOutage(err)
	if zone == "" {
		return
	}
	c := metav1.Condition{Type: ConditionZone, Status: metav1.ConditionFalse, Reason: "ZoneUnavailable",
		Message: cloud.Truncate(fmt.Sprintf("%s zone %s cannot be listed, so this Machine's server cannot be looked at (the other zones' Machines go on): %v", a.cloud.Name(), zone, err))}
	if err := a.setCondition(ctx, m, c); err != nil {
		a.log.Info("could not set the zone condition", "machine", machineKey(m), "error", err.Error())
	}
}
