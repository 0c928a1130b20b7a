package actuator

import (
	"errors"
	"net/http"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	maometrics "github.com/openshift/machine-api-operator/pkg/metrics"

	"github.com/appuio/machine-api-provider/pkg/cloud"
)

// countFailure fills the machine-api-operator's failure counters,
// mapi_instance_{create,update,delete}_failed{name,namespace,reason},
// through its own helpers, as the providers built into the operator do, so
// that dashboards and alerts made for those work for these Machines too.
// The operator's providers put the error's text into reason; here it is
// the class of the failure, named like the Machine's event
// (InvalidConfiguration, CredentialsRefused, PermissionRefused,
// CredentialsInvalid, SecretNotFound, RateLimited, CloudUnavailable,
// Failed): a bounded set of values, which can never carry a piece of a
// secret or of a cloud's answer. op is fail's reason (FailedCreate,
// FailedUpdate, FailedDelete, FailedExists). The machine controller checks
// whether the server exists before it creates, updates or deletes it, so
// a failed check counts for the operation it was the first step of: the
// delete of a deleted Machine, the create of one without a server yet,
// the update of the others.
func countFailure(m *machinev1.Machine, op string, err error) {
	if op == "FailedExists" {
		switch {
		case m.DeletionTimestamp != nil:
			op = "FailedDelete"
		case m.Spec.ProviderID == nil || *m.Spec.ProviderID == "":
			op = "FailedCreate"
		default:
			op = "FailedUpdate"
		}
	}
	var register func(*maometrics.MachineLabels)
	switch op {
	case "FailedCreate":
		register = maometrics.RegisterFailedInstanceCreate
	case "FailedUpdate":
		register = maometrics.RegisterFailedInstanceUpdate
	case "FailedDelete":
		register = maometrics.RegisterFailedInstanceDelete
	default:
		return
	}
	register(&maometrics.MachineLabels{Name: m.Name, Namespace: m.Namespace, Reason: failureClass(err)})
}

// failureClass names the class of a failed operation's error.
func failureClass(err error) string {
	var (
		inv       *invalidError
		cinv      *cloud.InvalidConfigError
		auth      *cloud.AuthError
		perm      *cloud.PermissionError
		creds     *cloud.CredentialsError
		missing   *secretMissingError
		retryable *cloud.RetryableError
		api       *cloud.APIError
	)
	switch {
	case errors.As(err, &inv), errors.As(err, &cinv):
		return "InvalidConfiguration"
	case errors.As(err, &perm):
		return "PermissionRefused"
	case errors.As(err, &auth):
		return "CredentialsRefused"
	case errors.As(err, &creds) && creds.Missing, errors.As(err, &missing):
		return "SecretNotFound"
	case errors.As(err, &creds):
		return "CredentialsInvalid"
	case errors.As(err, &retryable) && errors.As(err, &api) && api.Status == http.StatusTooManyRequests:
		return "RateLimited"
	case errors.As(err, &retryable):
		return "CloudUnavailable"
	default:
		return "Failed"
	}
}
