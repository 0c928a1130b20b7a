package actuator

import (
	"errors"
	"fmt"
	"time"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	machinecontroller "github.com/openshift/machine-api-operator/pkg/controller/machine"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/appuio/machine-api-provider/pkg/cloud"
)

// How long to wait before trying again, when the cloud gives no hint.
const (
	retryTransient     = 20 * time.Second
	retryMissingSecret = 30 * time.Second
	retryDuplicates    = 2 * time.Minute
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
	return errors.As(err, &inv) || errors.As(err, &cinv) ||
		(errors.As(err, &merr) && merr.Reason == machinev1.InvalidConfigurationMachineError)
}

// fail reports err on the Machine as a Warning event and turns it into what
// the machine controller acts on: a spec error fails the Machine for good,
// anything else is retried, after the cloud's hint where it gave one. The
// errors of this package and of pkg/cloud never carry tokens or user data.
func (a *Actuator) fail(m *machinev1.Machine, reason string, err error) error {
	var (
		inv       *invalidError
		cinv      *cloud.InvalidConfigError
		retryable *cloud.RetryableError
		missing   *secretMissingError
		dup       *duplicateServersError
	)
	switch {
	case errors.As(err, &inv):
		a.recorder.Event(m, corev1.EventTypeWarning, "InvalidConfiguration", inv.Error())
		return machinecontroller.InvalidMachineConfiguration("%s", inv.Error())
	case errors.As(err, &cinv):
		msg := cinv.Message
		if cinv.Field != "" {
			msg = specPath.String() + "." + cinv.Field + ": " + cinv.Message
		}
		msg = fmt.Sprintf("the %s API refused the server: %s", a.cloud.Name(), msg)
		a.recorder.Event(m, corev1.EventTypeWarning, "InvalidConfiguration", msg)
		return machinecontroller.InvalidMachineConfiguration("%s", msg)
	case errors.As(err, &retryable):
		after := retryable.RetryAfter
		if after <= 0 {
			after = retryTransient
		}
		a.recorder.Eventf(m, corev1.EventTypeWarning, reason, "%v; retrying in %s", err, after)
		a.log.Info("transient cloud error, retrying", "machine", machineKey(m), "reason", reason, "retryAfter", after, "error", err.Error())
		return &machinecontroller.RequeueAfterError{RequeueAfter: after}
	case errors.As(err, &missing):
		a.recorder.Event(m, corev1.EventTypeWarning, "SecretNotFound", missing.Error())
		return &machinecontroller.RequeueAfterError{RequeueAfter: retryMissingSecret}
	case errors.As(err, &dup):
		a.recorder.Event(m, corev1.EventTypeWarning, "DuplicateServers", dup.Error())
		return &machinecontroller.RequeueAfterError{RequeueAfter: retryDuplicates}
	default:
		a.recorder.Event(m, corev1.EventTypeWarning, reason, err.Error())
		a.log.Error(err, "cloud call failed", "machine", machineKey(m), "reason", reason)
		return err
	}
}
